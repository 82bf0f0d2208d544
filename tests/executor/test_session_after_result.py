"""``checkpoint="after_result"``: the checkpoint's copy from before a call is ended, and the next copy
forked, after the call's result is out, before the next call is read. What must hold as with
``checkpoint=True``: the next call never runs while the old copy holds what the last call closed, and a
fault restores the state as it was right before the failed call (never an older copy)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.executor import session_tools as S
from tests.executor.session_tools import dep, spoil, values
from toolfork.executor import Executor, ToolCall


@pytest.mark.parametrize("pause", [0.0, 0.1])
def test_the_next_call_never_runs_while_the_old_copy_holds_what_the_last_call_closed(
        make_executor: Callable[..., Executor], tmp_path: Path, pause: float) -> None:
    """The call after the one that closed the state's socket and file lock binds the port and takes the
    lock at once, every time (the copy from before the closing call is reaped before it runs; after a
    pause, that copy's reserve, which holds them too, with it)."""
    ex = make_executor([*S.SESSION_TOOLS, S.release, S.take_back], mode="fork", kill_grace=0.3)
    for i in range(5):
        lock_path = str(tmp_path / f"lock{i}")
        with ex.session(S.Listening, lock_path, checkpoint="after_result") as s:
            time.sleep(pause)  # (the checkpoint forks its reserve meanwhile)
            port = values(s.run([ToolCall("r", "release", {})]))[0]
            took = s.run([ToolCall("t", "take_back", {"port": port, "lock_path": lock_path})])[0]
            assert took.status == "ok" and took.output.as_text() == "free", took


@pytest.mark.parametrize("how", ["exit", "hang"])
def test_a_fault_restores_the_state_right_before_the_failed_call(
        make_executor: Callable[..., Executor], how: str) -> None:
    ex = make_executor(S.SESSION_TOOLS, mode="fork", kill_grace=0.3)
    with ex.session(S.Account, "ada", checkpoint="after_result") as s:
        assert values(s.run([dep(1, 1), dep(2, 2)])) == [1, 3]
        assert values(s.run([dep(3, 4)])) == [7]
        failed = s.run([spoil(how, timeout=1.0 if how == "hang" else None)])[0]
        assert failed.status == ("crashed" if how == "exit" else "timeout"), failed
        assert values(s.run([dep(4, 10)])) == [17] and s.restores == 1  # 7 before it, not 1 or 3
        failed = s.run([spoil(how, timeout=1.0 if how == "hang" else None)])[0]  # the copy forked at the restore
        assert values(s.run([dep(5, 1)])) == [18] and s.restores == 2
        assert s.snapshot().history == [1, 2, 4, 10, 1]


def test_a_checkpoint_that_is_not_one_of_the_three_is_refused_naming_it(
        make_executor: Callable[..., Executor]) -> None:
    ex = make_executor(S.SESSION_TOOLS, mode="fork")
    for bad in ("True", "after", 1):
        with pytest.raises(ValueError, match=r"checkpoint=.*give True, False or 'after_result'"):
            ex.session(S.Account, "ada", checkpoint=bad)
        with pytest.raises(ValueError, match=r"checkpoint=.*give True, False or 'after_result'"):
            ex.session_ahead(S.Account, "ada", checkpoint=bad)


def test_a_call_stuck_in_c_is_killed_at_once_at_its_timeout_and_rolled_back(
        make_executor: Callable[..., Executor]) -> None:
    """Its process is discarded (the checkpoint takes over), so it gets no grace: a call stuck in C code,
    which no SIGTERM reaches, does not keep the rollback waiting for ``kill_grace`` (5 s here)."""
    ex = make_executor(S.SESSION_TOOLS, mode="fork", kill_grace=5.0)
    with ex.session(S.Account, "ada", checkpoint="after_result") as s:
        assert values(s.run([dep(1, 7)])) == [7]
        started = time.monotonic()
        failed = s.run([spoil("hang_in_c", timeout=0.5)])[0]
        assert failed.status == "timeout", failed
        assert time.monotonic() - started < 3.5  # not 0.5 s + the 5 s grace
        assert values(s.run([dep(2, 1)])) == [8] and s.restores == 1


def test_sequential_mode_takes_after_result_as_a_checkpoint(make_executor: Callable[..., Executor]) -> None:
    """Only a fork session process has an "after" to move the copy to: elsewhere it is a checkpoint as
    True is (a state sequential mode cannot copy is refused at open, naming why)."""
    seq = make_executor(S.SESSION_TOOLS, mode="sequential")
    with pytest.raises(TypeError, match=r"checkpoint=True.*sequential.*deepcopy"):
        seq.session(S.Locked, "ada", checkpoint="after_result")
    with seq.session(S.Account, "ada", checkpoint="after_result") as s:
        assert values(s.run([dep(1, 5)])) == [5]


def _children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:  # (gone meanwhile)
        return []


def _started_s(pid: int) -> float:
    """When ``pid`` was forked, in seconds since boot (/proc/PID/stat's starttime)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rfind(b")") + 2:].split()[19]) / os.sysconf("SC_CLK_TCK")


def test_a_checkpoint_that_takes_over_has_its_own_checkpoint_already_and_it_holds_the_same_state(
        make_executor: Callable[..., Executor]) -> None:
    """The checkpoint forks its reserve as it waits: after a timeout the process that took over has, as
    its checkpoint, a copy forked while the failed call still ran (not after it: no fork stands between
    the rollback and the next call), of the state from before that call and nothing later, so a second
    timeout in a row rolls back to the same state, and a call that then runs gets a checkpoint of its own.
    Each old copy is gone once the next call's result is out: the session process holds only its
    checkpoint, and that only its reserve."""
    ex = make_executor(S.SESSION_TOOLS, mode="fork", kill_grace=0.3)
    with ex.session(S.Account, "ada", checkpoint="after_result") as s:
        assert values(s.run([dep(1, 7)])) == [7]
        assert values(s.run([spoil("hang", timeout=1.5)])) == ["timeout"]
        took_over = s.pid
        assert took_over is not None
        (checkpoint,) = _children_of(took_over)  # its reserve, and nothing else
        assert _started_s(checkpoint) - _started_s(took_over) < 0.75  # forked while the 1.5 s call ran
        assert values(s.run([spoil("hang", timeout=0.5)])) == ["timeout"]  # (+1000 again, then the timeout)
        assert s.pid == checkpoint and s.restores == 2  # the reserve took over in turn
        assert values(s.run([dep(2, 1)])) == [8]  # 7 + 1: neither failed call's 1000 is in any copy
        time.sleep(0.3)  # (its checkpoint forks its reserve meanwhile)
        assert values(s.run([dep(3, 0)])) == [8]  # that checkpoint and its reserve go, reaped
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (  # (once the old ones are reaped and the new reserve forked)
                len(_children_of(checkpoint)) == 1 and len(_children_of(_children_of(checkpoint)[0])) == 1):
            time.sleep(0.05)
        (after,) = _children_of(checkpoint)  # one checkpoint, and no old copy (not even a zombie)
        assert len(_children_of(after)) == 1  # its reserve
        assert values(s.run([spoil("exit")])) == ["crashed"]
        assert values(s.run([dep(4, 2)])) == [10] and s.restores == 3
        assert s.snapshot().history == [7, 1, 0, 2]
