"""Warm workers keep what a call changes in their process; ``fresh_process=True`` tools start pristine,
each call in a process forked from the template and gone after it."""

from __future__ import annotations

import os
import time

import pytest

from tests.procs import gone
from toolfork.executor import Executor, ToolCall
from toolfork.tools import tool

STATE: dict[str, str] = {}


def _state() -> dict[str, str | None]:
    return {"global": STATE.get("k"), "env": os.environ.get("TF_DIRTY"), "cwd": os.getcwd()}


@tool
def dirty(where: str) -> int:
    """Change this process's globals, environment and cwd."""
    STATE["k"] = "set"
    os.environ["TF_DIRTY"] = "1"
    os.chdir(where)
    return os.getpid()


@tool
def look() -> dict:
    """What this process looks like, in a warm worker."""
    return {**_state(), "pid": os.getpid()}


@tool(fresh_process=True)
def look_fresh() -> dict:
    """What this process looks like, in a fresh one."""
    return {**_state(), "pid": os.getpid()}


@tool(fresh_process=True)
def fresh_exit(code: int) -> str:
    """Die."""
    os._exit(code)


@tool(fresh_process=True)
def fresh_hang() -> str:
    """Never return."""
    while True:
        time.sleep(0.05)


TOOLS = [dirty, look, look_fresh, fresh_exit, fresh_hang]


def test_warm_workers_keep_state_and_fresh_processes_do_not(tmp_path):
    start_cwd = os.getcwd()
    with Executor(TOOLS, mode="fork", workers=1) as ex:
        pid = ex.run([ToolCall("d", "dirty", {"where": str(tmp_path)})])[0].output.data
        warm = ex.run([ToolCall("l", "look")])[0].output.data
        assert warm["pid"] == pid  # one worker: the same process...
        assert (warm["global"], warm["env"], warm["cwd"]) == ("set", "1", str(tmp_path))  # ...keeps it all
        fresh = [r.output.data for r in ex.run([ToolCall(f"f{i}", "look_fresh") for i in range(3)])]
        assert [(f["global"], f["env"], f["cwd"]) for f in fresh] == [(None, None, start_cwd)] * 3
        pids = {f["pid"] for f in fresh}
        assert len(pids) == 3 and pid not in pids  # a process of its own for every call...
        assert all(gone(p) for p in pids)  # ...and gone after it
        # the warm worker got its slot back and still has its state
        assert ex.run([ToolCall("l2", "look")])[0].output.data["pid"] == pid
        assert len(ex.backend.worker_pids) == 1


def test_fresh_processes_crash_and_time_out_like_any_call():
    with Executor(TOOLS, mode="fork", workers=2, kill_grace=0.2) as ex:
        results = ex.run([ToolCall("x", "fresh_exit", {"code": 4}),
                          ToolCall("h", "fresh_hang", {}, timeout=0.3),
                          ToolCall("l", "look")])
        assert results[0].status == "crashed" and "code 4" in results[0].error.message
        assert results[1].status == "timeout"
        assert results[2].status == "ok"
        assert len(ex.backend.worker_pids) == 2  # the slots came back
        assert ex.run([ToolCall("f", "look_fresh")])[0].status == "ok"


def test_fresh_process_and_inline_are_exclusive():
    from toolfork.tools import ToolDefinitionError

    def f(x: int) -> int:
        """Return x."""
        return x

    with pytest.raises(ToolDefinitionError, match="fresh_process"):
        tool(inline=True, fresh_process=True)(f)
