"""Sessions (``Executor.session``): a state built once, calls run on it in order, faults never silent.

Every test runs real processes: the session's process forked from the template, its checkpoint, the
tools crashing (os._exit, SIGSEGV) or hanging (in Python, inside a C call that never returns to the
interpreter) in them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.executor import session_tools as S
from tests.executor import tools_for_tests as T
from tests.executor.session_tools import dep, spoil, values
from toolfork import SessionLost, Tool
from toolfork.executor import Executor, ToolCall


@pytest.fixture
def ex(make_executor: Callable[..., Executor], mode: str) -> Executor:
    return make_executor([*S.SESSION_TOOLS, T.add], mode=mode, kill_grace=0.3)


@pytest.fixture
def fork_ex(make_executor: Callable[..., Executor]) -> Executor:
    return make_executor([*S.SESSION_TOOLS, T.add], mode="fork", kill_grace=0.3)


# ------------------------------------------------------------------------------------------ the API


def test_calls_run_on_one_state_in_order_and_snapshot_rebuilds_it(ex: Executor) -> None:
    with ex.session(S.Account, "ada", balance=5) as s:
        assert values(s.run([dep(1, 10), dep(2, 20), dep(3, -3)])) == [15, 35, 32]
        assert values(s.run([dep(4, 1)])) == [33]
        snap = s.snapshot()
    assert snap == S.Account("ada", 33) or (snap.balance, snap.history) == (33, [10, 20, -3, 1])
    assert snap.history == [10, 20, -3, 1]


def test_a_session_call_carries_its_meta(ex: Executor) -> None:
    with ex.session(S.Account, "ada") as s:
        first, second = s.run([ToolCall("m1", "tagged", {}, meta={"tag": "t-1"}), ToolCall("m2", "tagged", {})])
    assert [first.output.as_text(), second.output.as_text()] == ["ada:t-1", "ada:-"]  # type: ignore[union-attr]


def test_sessions_are_apart_from_each_other_and_from_pool_calls(ex: Executor) -> None:
    with ex.session(S.Account, "a") as a, ex.session(S.Account, "b", 100) as b:
        assert values(a.run([dep(1, 1)])) == [1]
        assert values(b.run([dep(1, 2)])) == [102]
        assert values(a.run([dep(2, 1)])) == [2]
        # outside a session a tool has no state; the pool's calls run beside the sessions
        outside = ex.run([ToolCall("w", "where", {}), ToolCall("x", "add", {"a": 1, "b": 2})])
        assert values(outside)[1] == 3 and values(outside)[0][1] == 0
        inside = a.run([ToolCall("w", "where", {})])[0].output.data
        assert inside[1] == 1
        if ex.mode == "fork":
            assert inside[0] == a.pid and a.pid != b.pid and a.pid != os.getpid()
        assert (a.snapshot().balance, b.snapshot().balance) == (2, 102)


def test_many_sessions_in_threads_each_keep_their_order(ex: Executor) -> None:
    errors: list[BaseException] = []
    finals: dict[int, list[int]] = {}

    def episode(k: int) -> None:
        try:
            with ex.session(S.Account, f"user{k}", k) as s:
                for i in range(15):
                    s.run([dep(i, i)])
                finals[k] = s.snapshot().history
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=episode, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    pool = ex.run([ToolCall(f"p{i}", "add", {"a": i, "b": i}) for i in range(20)])
    for t in threads:
        t.join(60)
    assert not errors
    assert finals == {k: list(range(15)) for k in range(8)}
    assert values(pool) == [2 * i for i in range(20)]


def test_arun(ex: Executor) -> None:
    with ex.session(S.Account, "ada") as s:
        assert values(asyncio.run(s.arun([dep(1, 4), dep(2, 4)]))) == [4, 8]


def test_bad_input_is_named(ex: Executor) -> None:
    with pytest.raises(TypeError, match="factory must be callable"):
        ex.session("not a factory")  # type: ignore[arg-type]
    with pytest.raises((RuntimeError, ValueError), match="no account for bob"):
        ex.session(S.broken_factory, "bob")
    with ex.session(S.Account, "ada") as s:
        with pytest.raises(ValueError, match="duplicate call id"):
            s.run([dep(1, 1), dep(1, 1)])
        unknown, invalid = s.run([ToolCall("u", "nope", {}), ToolCall("i", "deposit", {"amount": "x"})])
        assert unknown.error.type == "UnknownToolError" and invalid.status == "error"
        assert values(s.run([dep(2, 1)])) == [1]  # an error result is not a fault: the session goes on


def test_a_state_that_cannot_be_sent_fails_the_snapshot_only(fork_ex: Executor) -> None:
    with fork_ex.session(S.Unsendable) as s:
        with pytest.raises(RuntimeError, match="could not be sent to the host"):
            s.snapshot()
        assert s.run([ToolCall("w", "where", {})])[0].status == "ok"


def test_closed_session_and_closed_executor(make_executor: Callable[..., Executor]) -> None:
    ex = make_executor([*S.SESSION_TOOLS], mode="fork")
    s = ex.session(S.Account, "ada")
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.run([dep(1, 1)])
    open_one = ex.session(S.Account, "bob")
    ex.close()  # takes the open session's processes with it (the suite checks no process is left)
    assert open_one.closed


# ------------------------------------------------------------------------------------------ faults

FAULTS = [("exit", None, "crashed"), ("segv", None, "crashed"), ("hang", 0.5, "timeout"),
          ("hang_in_c", 0.5, "timeout")]


@pytest.mark.parametrize(("how", "timeout", "status"), FAULTS)
def test_a_fault_loses_the_session_never_silently(fork_ex: Executor, how: str, timeout: float | None,
                                                  status: str) -> None:
    with fork_ex.session(S.Account, "ada") as s, fork_ex.session(S.Account, "other", 1) as other:
        assert values(s.run([dep(1, 5)])) == [5]
        failed, after = s.run([spoil(how, timeout), dep(2, 1)])
        assert failed.status == status
        assert after.status == "error" and after.error.type == "SessionLost"
        assert f"spoil-{how}" in after.error.message
        with pytest.raises(SessionLost, match=f"spoil-{how}") as lost:
            s.run([dep(3, 1)])
        assert lost.value.call_id == f"spoil-{how}"
        with pytest.raises(SessionLost):
            s.snapshot()
        assert values(other.run([dep(1, 1)])) == [2]  # no other session is touched
    assert values(fork_ex.run([ToolCall("a", "add", {"a": 1, "b": 1})])) == [2]


@pytest.mark.parametrize(("how", "timeout", "status"), FAULTS)
def test_checkpoint_restores_the_state_from_before_the_failed_call(fork_ex: Executor, how: str,
                                                                   timeout: float | None, status: str) -> None:
    with fork_ex.session(S.Account, "ada", checkpoint=True) as s, fork_ex.session(S.Account, "other") as other:
        assert values(s.run([dep(1, 5)])) == [5]
        first_pid = s.pid
        failed, after = s.run([spoil(how, timeout), dep(2, 1)])
        assert failed.status == status
        assert values([after]) == [6]  # the failed call's +1000 is gone with its process
        assert s.restores == 1 and s.pid != first_pid
        failed_again = s.run([spoil(how, timeout)])[0]
        assert failed_again.status == status and s.restores == 2
        assert values(s.run([dep(3, 1)])) == [7]
        assert s.snapshot().history == [5, 1, 1]
        assert values(other.run([dep(1, 1)])) == [1]


def test_an_error_keeps_what_the_tool_changed_as_a_direct_call_would(fork_ex: Executor) -> None:
    with fork_ex.session(S.Account, "ada", checkpoint=True) as s:
        assert s.run([spoil("raise")])[0].status == "error"
        assert s.snapshot().balance == 1000 and s.restores == 0


def test_a_tool_that_kills_its_checkpoint_loses_the_session(fork_ex: Executor) -> None:
    with fork_ex.session(S.Account, "ada", checkpoint=True) as s:
        assert values(s.run([dep(1, 1)])) == [1]
        assert s.run([spoil("kill_children")])[0].status == "crashed"
        with pytest.raises(SessionLost, match="checkpoint"):
            s.run([dep(2, 1)])


def test_sequential_timeout_loses_or_restores_the_state_in_the_host(make_executor: Callable[..., Executor]) -> None:
    ex = make_executor([*S.SESSION_TOOLS], mode="sequential")
    with ex.session(S.Account, "ada") as s:
        assert s.pid == os.getpid()
        assert s.run([spoil("hang", 0.3)])[0].status == "timeout"
        with pytest.raises(SessionLost):
            s.run([dep(1, 1)])
    with ex.session(S.Account, "ada", checkpoint=True) as s:
        assert values(s.run([dep(1, 2)])) == [2]
        assert s.run([spoil("hang", 0.3)])[0].status == "timeout"
        assert values(s.run([dep(2, 2)])) == [4]


def test_tools_added_after_a_session_opened_reach_later_sessions(fork_ex: Executor) -> None:
    with fork_ex.session(S.Account, "ada") as s:
        assert s.run([ToolCall("a", "add", {"a": 1, "b": 1})])[0].status == "ok"
    fork_ex.add_tools(T.whoami)  # the spare session processes forked before have the old tools
    with fork_ex.session(S.Account, "bob") as s:
        assert s.run([ToolCall("w", "whoami", {})])[0].output.data == s.pid


def test_a_sandboxed_tool_is_refused_in_a_session_naming_why(make_executor: Callable[..., Executor]) -> None:
    from toolfork import Limits

    ex = make_executor([*S.SESSION_TOOLS, T.add], mode="fork", limits=None)
    ex.add_tools(Tool(name="offline", description="Offline.", fn=lambda: "ran", limits=Limits(network=False)))
    with ex.session(S.Account, "ada") as s:
        refused = s.run([ToolCall("o", "offline", {})])[0]
        assert refused.status == "error" and "sandbox" in refused.error.message
        assert values(s.run([dep(1, 1)])) == [1]


def test_checkpoint_restores_a_fault_in_the_very_first_call(fork_ex: Executor) -> None:
    with fork_ex.session(S.Account, "ada", 3, checkpoint=True) as s:
        failed, after = s.run([spoil("exit"), dep(1, 1)])
        assert failed.status == "crashed" and values([after]) == [4]
        assert values(s.run([dep(2, 1)])) == [5] and s.restores == 1


def test_checkpoint_restores_faults_one_right_after_another(fork_ex: Executor) -> None:
    with fork_ex.session(S.Account, "ada", 3, checkpoint=True) as s:
        results = s.run([spoil("exit"), spoil("hang", 0.5), spoil("segv"), dep(1, 1)])
        assert [r.status for r in results] == ["crashed", "timeout", "crashed", "ok"]
        assert values(results[3:]) == [4] and s.restores == 3


def test_a_session_dropped_without_close_lets_its_processes_go(fork_ex: Executor) -> None:
    import gc

    import psutil

    s = fork_ex.session(S.Account, "ada")
    pid = s.pid
    assert pid is not None and psutil.pid_exists(pid)
    del s
    gc.collect()
    try:
        psutil.Process(pid).wait(10)  # raises TimeoutExpired if it stays
    except psutil.NoSuchProcess:  # gone already
        pass


def test_caps_and_hooks_apply_to_session_calls(make_executor: Callable[..., Executor], tmp_path: Any) -> None:
    hooked = tmp_path / "hooked"

    def mark() -> None:
        with open(hooked, "a") as f:
            f.write(f"{os.getpid()}\n")

    log = str(tmp_path / "marks")
    ex = make_executor([S.one_at_a_time], mode="fork", before_child=mark)
    pids: list[Any] = []

    def episode(owner: str) -> None:
        with ex.session(S.Account, owner) as s:
            pids.append(s.pid)
            for i in range(3):
                s.run([ToolCall(f"{owner}{i}", "one_at_a_time", {"log": log})])

    threads = [threading.Thread(target=episode, args=(o,)) for o in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    marks = open(log).read().split("\n")[:-1]
    assert len(marks) == 18
    assert all(marks[i].startswith("start") and marks[i + 1] == "end" + marks[i][5:] for i in range(0, 18, 2))
    assert None not in pids  # known when the session opens
    assert sorted(int(p) for p in hooked.read_text().split()) == sorted(pids * 3)


def test_closing_the_executor_stops_a_session_call_that_would_never_end(
        make_executor: Callable[..., Executor]) -> None:
    ex = make_executor([*S.SESSION_TOOLS], mode="fork", kill_grace=0.2)
    s = ex.session(S.Account, "ada", checkpoint=True)
    got: list[Any] = []
    runner = threading.Thread(target=lambda: got.extend(s.run([spoil("hang_in_c"), dep(1, 1)])))
    runner.start()
    time.sleep(0.5)
    ex.close()  # must not wait for a call without a timeout
    runner.join(30)
    assert not runner.is_alive() and s.closed
    assert got[0].status == "crashed" and got[1].error.type == "SessionLost"


def test_sessions_open_after_the_template_was_replaced(fork_ex: Executor) -> None:
    import signal

    with fork_ex.session(S.Account, "ada") as s:  # the spares are forked now, by this template
        assert values(s.run([dep(1, 1)])) == [1]
    open_one = fork_ex.session(S.Account, "eve", checkpoint=True)
    os.kill(fork_ex.backend.core.template_pid, signal.SIGKILL)  # type: ignore[attr-defined]
    # The pool notices within a second and forks a new template (a call sent before it noticed would
    # be "crashed" with its worker, as the pool's own tests show); then calls run again.
    deadline = time.monotonic() + 30
    while fork_ex.stats().template_restarts < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fork_ex.stats().template_restarts == 1
    assert values(fork_ex.run([ToolCall("a", "add", {"a": 1, "b": 1})])) == [2]
    # a session open then is gone with the template's processes (once its process is dead): lost, never reset
    import psutil

    try:
        psutil.Process(open_one.pid).wait(10)
    except psutil.NoSuchProcess:
        pass
    assert open_one.run([dep(1, 1)])[0].status == "crashed"
    with pytest.raises(SessionLost):
        open_one.run([dep(2, 1)])
    open_one.close()
    with fork_ex.session(S.Account, "bob", 2) as s:
        assert values(s.run([dep(1, 1)])) == [3]


def test_limits_apply_to_session_calls(make_executor: Callable[..., Executor], tmp_path: Any) -> None:
    ex = make_executor([S.write_mb], mode="fork")
    with ex.session(S.Account, "ada") as s:
        big, small = s.run([ToolCall("b", "write_mb", {"path": str(tmp_path / "b"), "mb": 4}),
                            ToolCall("s", "write_mb", {"path": str(tmp_path / "s"), "mb": 0})])
        assert big.status == "error" and big.error.type == "LimitExceeded" and "file size" in big.error.message
        assert values([small]) == [0]  # the call failed, the process and its state go on


@pytest.mark.parametrize("end", ["close", "crash"])
def test_what_a_session_call_started_dies_with_the_session(fork_ex: Executor, end: str) -> None:
    import psutil

    fork_ex.add_tools(S.start_daemon)
    with fork_ex.session(S.Account, "ada", checkpoint=True) as s:
        daemon = s.run([ToolCall("d", "start_daemon", {})])[0].output.data
        assert psutil.pid_exists(daemon)
        if end == "crash":
            assert s.run([spoil("exit")])[0].status == "crashed"
    try:
        psutil.Process(daemon).wait(10)  # raises TimeoutExpired if it stays
    except psutil.NoSuchProcess:
        pass


def test_a_factory_that_never_returns_is_ended_at_the_executors_timeout(
        make_executor: Callable[..., Executor], tmp_path: Any) -> None:
    import psutil

    ex = make_executor([*S.SESSION_TOOLS], mode="fork", timeout=1.0, kill_grace=0.3)
    pid_file = tmp_path / "pid"
    with pytest.raises(TimeoutError, match=r"factory did not return within the executor's timeout \(1 s\)"):
        ex.session(S.stuck_factory, str(pid_file))
    pid = int(pid_file.read_text())
    try:
        psutil.Process(pid).wait(10)  # killed, not left behind: TimeoutExpired if it stays
    except psutil.NoSuchProcess:
        pass
    with ex.session(S.Account, "ada") as s:  # the executor goes on
        assert values(s.run([dep(1, 5)])) == [5]


def test_any_factory_a_user_can_write_opens_in_every_mode(ex: Executor) -> None:
    """A lambda and a local function go to a session's process by value (dill), which plain pickle
    cannot read back; a partial and a class go by reference."""
    got = []
    for factory, args in S.every_kind_of_factory():
        with ex.session(factory, *args) as s:
            got.append(values(s.run([dep(1, 1)]))[0])
    assert got == [2, 6, 3, 4]


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_snapshot_that_ends_the_process_never_mislabels_the_next_call(fork_ex: Executor, checkpoint: bool) -> None:
    """Pickling the state kills the session's process: without a checkpoint the session is lost (the next
    run raises SessionLost: no call is reported "crashed" that never ran); with one, it takes over."""
    with fork_ex.session(S.DiesWhenSent, checkpoint=checkpoint) as s:
        assert values(s.run([dep(1, 5)])) == [5]
        if checkpoint:
            with pytest.raises(RuntimeError, match="checkpoint took over"):
                s.snapshot()
            assert values(s.run([dep(2, 1)])) == [6]
        else:
            with pytest.raises(SessionLost, match="died while sending its state"):
                s.snapshot()
            with pytest.raises(SessionLost):
                s.run([dep(2, 1)])


def test_cancelling_the_task_awaiting_arun_stops_its_call(make_executor: Callable[..., Executor],
                                                           tmp_path: Any) -> None:
    """As with ``acall``: the call's process is killed, its effect never lands, and the session is lost
    (its state may be half changed) instead of running the call on unseen."""
    ex = make_executor([*S.SESSION_TOOLS, S.slow_effect], mode="fork", kill_grace=0.3)
    effect = tmp_path / "effect"
    with ex.session(S.Account, "ada") as s:

        async def cancel_it() -> None:
            task = asyncio.ensure_future(s.arun([ToolCall("e", "slow_effect", {"path": str(effect), "seconds": 2})]))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancel_it())
        time.sleep(2.5)
        assert not effect.exists(), "the cancelled call ran on"
        started = time.monotonic()
        with pytest.raises(SessionLost):
            s.run([dep(1, 1)])
        assert time.monotonic() - started < 5


def test_a_checkpoint_never_holds_what_the_call_closed_once_its_result_is_in(
        make_executor: Callable[..., Executor], tmp_path: Any) -> None:
    """The checkpoint is a copy of the session's process: it holds the state's socket and file lock. The
    copy from before a call goes before the call's result does, so once the result is in, what the
    call closed is free (the port binds, the lock is taken), at once, every time."""
    ex = make_executor([*S.SESSION_TOOLS, S.release], mode="fork", kill_grace=0.3)
    for i in range(5):
        lock_path = tmp_path / f"lock{i}"
        with ex.session(S.Listening, str(lock_path), checkpoint=True) as s:
            port = values(s.run([ToolCall("r", "release", {})]))[0]
            S.take_port_and_lock(port, str(lock_path))


def test_a_sequential_checkpoint_refuses_at_open_a_state_it_cannot_copy(
        make_executor: Callable[..., Executor]) -> None:
    """Fork mode copies the state by forking, which takes anything; sequential mode copies it with
    ``copy.deepcopy``: a state it cannot copy is refused when the session opens, naming why."""
    fork = make_executor(S.SESSION_TOOLS, mode="fork")
    with fork.session(S.Locked, "ada", checkpoint=True) as s:
        assert values(s.run([dep(1, 1), spoil("exit"), dep(2, 1)])) == [1, "crashed", 2]
    seq = make_executor(S.SESSION_TOOLS, mode="sequential")
    with pytest.raises(TypeError, match=r"checkpoint=True.*sequential.*deepcopy.*lock"):
        seq.session(S.Locked, "ada", checkpoint=True)
    with seq.session(S.Locked, "ada") as s:  # without a checkpoint there is nothing to copy
        assert values(s.run([dep(1, 1)])) == [1]


def test_a_session_is_a_capability_its_backend_opens(ex: Executor, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Executor.session`` asks the backend (``Backend.open_session``) with what the session needs, and
    the session's own module names no backend's internals."""
    import ast
    import inspect

    from toolfork.executor.sessions import session as session_module

    asked: list[Any] = []
    backend = type(ex.backend)
    opened = backend.open_session
    monkeypatch.setattr(backend, "open_session", lambda self, spec: asked.append(spec) or opened(self, spec))
    with ex.session(S.Account, "ada", 7, checkpoint=True) as s:
        assert values(s.run([dep(1, 1)])) == [8]
    assert [(a.factory, a.args, a.checkpoint) for a in asked] == [(S.Account, ("ada", 7), True)]
    imported = {node.module for node in ast.walk(ast.parse(inspect.getsource(session_module)))
                if isinstance(node, ast.ImportFrom) and node.module}
    assert not [m for m in imported if m.startswith("toolfork.executor.backends.") and
                m not in ("toolfork.executor.sessions.place", "toolfork.executor.backends.base",
                          "toolfork.executor.backends.dispatch")], imported  # the contract's modules only


@pytest.mark.parametrize("first", ["nothing", "the template"])
def test_close_ends_what_the_factory_started_whatever_died_first(fork_ex: Executor, tmp_path: Any,
                                                                 first: str) -> None:
    """A daemon the factory started (its own session and process group) goes with the session: at
    ``close()``, or when the template dies first (the sessions' supervisor, told of it, kills every
    session's process and then what they started)."""
    import signal

    import psutil

    pid_file = tmp_path / "daemon.pid"
    s = fork_ex.session(S.WithDaemon, "ada", str(pid_file))
    try:
        assert values(s.run([dep(1, 1)])) == [1]
        daemon = psutil.Process(int(pid_file.read_text()))
        if first == "the template":
            os.kill(fork_ex.backend.template_pid, signal.SIGKILL)  # type: ignore[attr-defined]
    finally:
        s.close()
    try:
        daemon.wait(10)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        daemon.kill()
        pytest.fail(f"the factory's daemon outlived close() ({first} died first)")
