"""The sessions' supervisor: one process forks every session's process (one fork to open a session), and
hundreds of sessions are open at once. Attacks: more sessions than ``select()`` can watch, the
supervisor killed under open sessions, tools changed while sessions run on the old ones."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import psutil
import pytest

from tests.executor import session_tools as S
from tests.executor import tools_for_tests as T
from toolfork import SessionLost
from toolfork.executor import Executor, ToolCall


@pytest.fixture
def fork_ex(make_executor: Callable[..., Executor]) -> Executor:
    return make_executor([*S.SESSION_TOOLS, T.add], mode="fork", kill_grace=0.3)


def deposit(i: int, amount: int) -> ToolCall:
    return ToolCall(f"d{i}", "deposit", {"amount": amount})


def supervisor_of(pid: int | None) -> int:
    assert pid is not None
    return psutil.Process(pid).ppid()


def test_killing_the_supervisor_loses_the_open_sessions_and_the_next_ones_open(fork_ex: Executor) -> None:
    with fork_ex.session(S.Account, "ada", checkpoint=True) as a, fork_ex.session(S.Account, "bob") as b:
        assert [s.run([deposit(1, 1)])[0].output.data for s in (a, b)] == [1, 1]
        supervisor = supervisor_of(a.pid)
        assert supervisor == supervisor_of(b.pid) != fork_ex.backend.template_pid  # type: ignore[attr-defined]
        os.kill(supervisor, signal.SIGKILL)
        psutil.Process(a.pid).wait(10)  # its processes die with it (and its checkpoints: nothing to restore)
        for s in (a, b):
            assert s.run([deposit(2, 1)])[0].status == "crashed"
            with pytest.raises(SessionLost):
                s.run([deposit(3, 1)])
    with fork_ex.session(S.Account, "cyd", 10) as c:
        assert c.run([deposit(1, 1)])[0].output.data == 11
        assert supervisor_of(c.pid) != supervisor


def test_sessions_on_old_tools_go_on_and_their_supervisor_leaves_after_the_last(fork_ex: Executor) -> None:
    old = fork_ex.session(S.Account, "ada")
    old.run([deposit(1, 1)])
    first = supervisor_of(old.pid)
    fork_ex.add_tools(T.whoami)
    with fork_ex.session(S.Account, "bob") as new:
        assert new.run([ToolCall("w", "whoami", {})])[0].output.data == new.pid  # the new tool is there
        assert supervisor_of(new.pid) != first
        assert old.run([deposit(2, 1)])[0].output.data == 2  # the old session goes on, on its old tools
        old.close()
        try:
            psutil.Process(first).wait(10)  # raises TimeoutExpired if the old supervisor stays
        except psutil.NoSuchProcess:
            pass
        assert new.run([deposit(3, 1)])[0].output.data == 1


def test_checkpoints_take_over_while_other_sessions_die_around_them(fork_ex: Executor) -> None:
    """Every crash, in every session, is restored: one supervisor reaps them all, and the death of one
    session's process must never take another's newest checkpoint with it."""
    from concurrent.futures import ThreadPoolExecutor

    def episode(i: int) -> list[object]:
        with fork_ex.session(S.Account, f"owner{i}", checkpoint=True) as s:
            out: list[object] = []
            for k in range(6):
                crashed, after = s.run([ToolCall(f"x{k}", "spoil_then", {"how": "exit"}), deposit(k, 1)])
                out.append((crashed.status, after.output.data if after.status == "ok" else after.status))
            return [*out, s.restores]

    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(episode, range(12)))
    assert got == [[*(("crashed", k + 1) for k in range(6)), 6] for _ in range(12)]


def test_a_lost_session_left_open_leaves_the_supervisor_asleep(fork_ex: Executor) -> None:
    """Its process is gone (and so is the socket it named checkpoints on): the supervisor waits for the
    host to close the session, asleep, instead of being woken by that dead socket again and again."""
    import time

    with fork_ex.session(S.Account, "ada") as s:
        assert s.run([ToolCall("x", "spoil_then", {"how": "exit"})])[0].status == "crashed"
        supervisor = psutil.Process(supervisor_of_live(fork_ex))
        # Its CPU time over a second, once it has dealt with the death: a supervisor woken again and
        # again spends most of what it gets (its state is no measure: on a loaded machine a process
        # that is about to sleep waits its turn to run, "running").
        time.sleep(0.5)
        before = sum(supervisor.cpu_times()[:2])
        time.sleep(1.0)
        spent = sum(supervisor.cpu_times()[:2]) - before
    assert spent < 0.05, f"the supervisor used {spent:.2f} CPU-seconds in a second of waiting"


def supervisor_of_live(ex: Executor) -> int:
    """The supervisor's pid, from a session opened for it (the executor keeps sessions' processes ahead)."""
    with ex.session(S.Account, "probe") as probe:
        return supervisor_of(probe.pid)


def test_a_checkpoint_orphaned_before_its_name_is_read_is_not_taken_for_a_leftover(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The race behind lost sessions under load: a session process names its new checkpoint and dies
    (the checkpoint becomes the supervisor's child) between the supervisor's read of the names and its
    look at its children. The children are listed first, then the names read: the checkpoint stays, and
    only a child that no session names goes."""
    import socket

    from toolfork.executor.backends.base import WorkerSetup
    from toolfork.executor.backends.fork import session_worker as sw

    mux, mux_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ctl, ctl_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    up, down = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    up.setblocking(False)
    checkpoint, leftover = 4_000_001, 4_000_002  # no such processes: nothing is signalled, only recorded
    killed: list[int] = []
    monkeypatch.setattr(sw, "child_pids", lambda: [checkpoint, leftover])
    monkeypatch.setattr(sw, "kill_group", killed.append)
    supervisor = sw._Supervisor(mux, {}, WorkerSetup())
    session = sw._Session(ctl, up, 4_000_000)
    session.running = None  # its process died: the checkpoint it named last is all that is left of it
    supervisor.by_ctl[ctl.fileno()] = session
    supervisor.by_up[up.fileno()] = session
    try:
        socket.send_fds(down, [b"c%d" % checkpoint], [ours.fileno()])  # not read yet
        supervisor.kill_leftovers()
        assert killed == [leftover]
        assert session.checkpoint is not None and session.checkpoint[0] == checkpoint
    finally:
        if session.checkpoint is not None:
            session.checkpoint[1].close()
        supervisor.wake.close()
        for sock in (mux, mux_peer, ctl, ctl_peer, up, down, ours, theirs):
            sock.close()


def test_open_sessions_are_bounded_by_max_sessions_not_by_the_input(make_executor: Callable[..., Executor]) -> None:
    """Opening past the bound raises, naming it; closing one makes room; the default is workers x 8."""
    from toolfork.executor import TooManySessions

    assert make_executor(S.SESSION_TOOLS, mode="fork", workers=3).max_sessions == 24
    with pytest.raises(ValueError, match="max_sessions"):
        make_executor(S.SESSION_TOOLS, mode="fork", max_sessions=0)
    ex = make_executor(S.SESSION_TOOLS, mode="fork", max_sessions=3)
    sessions = [ex.session(S.Account, f"o{i}") for i in range(3)]
    with pytest.raises(TooManySessions, match="3 sessions are open"):
        ex.session(S.Account, "one too many")
    sessions[0].close()
    with ex.session(S.Account, "room") as s:
        assert s.run([deposit(1, 1)])[0].output.data == 1
    for s in sessions:
        s.close()


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_closed_sessions_process_is_gone_when_close_returns(make_executor: Callable[..., Executor],
                                                            checkpoint: bool) -> None:
    """max_sessions bounds processes: its supervisor ends a closed session's process a moment after the
    close, so ``close`` returns only then, and the next open cannot start while it still runs."""
    from toolfork.executor.backends.fork.template_link import process_state

    ex = make_executor(S.SESSION_TOOLS, mode="fork", max_sessions=1)
    for i in range(5):
        s = ex.session(S.Account, f"o{i}", checkpoint=checkpoint)
        assert s.run([deposit(i, 1)])[0].output.data == 1
        pid = s.pid
        assert pid is not None and process_state(pid) not in (None, b"Z", b"X")
        s.close()
        assert process_state(pid) in (None, b"Z", b"X"), f"session {i}'s process {pid} still runs after close"
