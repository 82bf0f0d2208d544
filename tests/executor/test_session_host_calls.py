"""A session's calls asking the host to run its host tools (``Executor.session(host_tools=...)``,
``ToolRuntime.call_host``): the tool runs in the pool, in another process, with its arguments checked;
only the names the session was opened with run; only the running call may ask; other modes refuse at
open, naming why."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.executor.session_tools import mark
from toolfork import Limits, ToolRuntime, tool
from toolfork.executor import Executor, ToolCall
from toolfork.executor.backends.ray import RayBackend
from toolfork.executor.sessions.place import SessionUnavailable


@tool
def lookup(key: str) -> dict[str, Any]:
    """A host tool: where it ran, and what it was asked.

    Args:
        key: what to look up
    """
    return {"pid": os.getpid(), "key": key}


@tool
def slow(seconds: float) -> str:
    """A host tool that takes its time.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return "done"


@tool
def failing() -> str:
    """A host tool that raises."""
    raise ValueError("the host tool broke")


@tool
def ask(name: str, arguments: dict[str, Any], runtime: ToolRuntime) -> dict[str, Any]:
    """Ask the host to run ``name``; what came back, or the error's type and message.

    Args:
        name: the host tool
        arguments: its arguments
    """
    try:
        return {"value": runtime.call_host(name, **arguments), "pid": os.getpid()}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "pid": os.getpid()}


@tool
def ask_late(runtime: ToolRuntime) -> str:
    """Keep the runtime for the next call, and ask from a thread of this call."""
    runtime.state["kept"] = runtime
    out: list[str] = []

    def from_thread() -> None:
        try:
            runtime.call_host("lookup", key="t")
            out.append("asked")
        except Exception as exc:
            out.append(f"{type(exc).__name__}: {exc}")

    t = threading.Thread(target=from_thread)
    t.start()
    t.join()
    return out[0]


@tool
def ask_with_kept(runtime: ToolRuntime) -> str:
    """Ask through the runtime an earlier call kept."""
    try:
        runtime.state["kept"].call_host("lookup", key="k")
        return "asked"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


TOOLS = [lookup, mark, slow, failing, ask, ask_late, ask_with_kept]


def _one(s: Any, name: str, arguments: dict[str, Any], timeout: float | None = 30) -> Any:
    r = s.run([ToolCall(f"c{time.monotonic_ns()}", name, arguments, timeout=timeout)])[0]
    assert r.status == "ok", r
    return r.output.data if r.output.data is not None else r.output.as_text()


@pytest.fixture
def ex() -> Any:
    with Executor(TOOLS, mode="fork", workers=2, timeout=60) as e:
        yield e


@pytest.mark.parametrize("checkpoint", [False, True, "after_result"])
def test_a_host_tool_runs_in_the_pool_and_its_value_comes_back(ex: Executor, checkpoint: bool | str) -> None:
    with ex.session(dict, host_tools=["lookup"], checkpoint=checkpoint) as s:
        got = _one(s, "ask", {"name": "lookup", "arguments": {"key": "k1"}})
        assert got["value"]["key"] == "k1"
        assert got["value"]["pid"] not in (os.getpid(), got["pid"], s.pid)  # a pool worker, not the session
        got = _one(s, "ask", {"name": "lookup", "arguments": {"key": "k2"}})  # and again, on the same session
        assert got["value"]["key"] == "k2"


def test_only_the_named_tools_run_and_the_session_goes_on(ex: Executor, tmp_path: Path) -> None:
    target = tmp_path / "marked"
    with ex.session(dict, host_tools=["lookup"]) as s:
        got = _one(s, "ask", {"name": "mark", "arguments": {"path": str(target)}})
        assert "HostToolError" in got["error"] and "'mark' is not one this session may" in got["error"]
        assert "lookup" in got["error"]  # it names the ones it may
        assert not target.exists()
        assert _one(s, "ask", {"name": "lookup", "arguments": {"key": "after"}})["value"]["key"] == "after"
    with ex.session(dict) as s:  # no host tools at all
        got = _one(s, "ask", {"name": "lookup", "arguments": {"key": "x"}})
        assert "opened without host_tools" in got["error"], got


def test_the_host_checks_arguments_and_names_a_failure(ex: Executor) -> None:
    with ex.session(dict, host_tools=["lookup", "failing", "nowhere"]) as s:
        got = _one(s, "ask", {"name": "lookup", "arguments": {"key": 3, "extra": 1}})
        assert "HostToolError" in got["error"] and "lookup" in got["error"], got
        got = _one(s, "ask", {"name": "failing", "arguments": {}})
        assert "the host tool broke" in got["error"], got
        got = _one(s, "ask", {"name": "nowhere", "arguments": {}})  # named, but no such tool
        assert "UnknownToolError" in got["error"], got


def test_a_pool_call_cannot_ask_the_host(ex: Executor) -> None:
    r = ex.run([ToolCall("p", "ask", {"name": "lookup", "arguments": {"key": "x"}})])[0]
    assert r.status == "ok" and "does not run in a session opened with host_tools" in r.output.data["error"]


def test_only_the_running_call_may_ask_from_its_own_thread(ex: Executor) -> None:
    with ex.session(dict, host_tools=["lookup"]) as s:
        assert "only the thread that runs the call" in _one(s, "ask_late", {})
        assert "has ended" in _one(s, "ask_with_kept", {})
        assert _one(s, "ask", {"name": "lookup", "arguments": {"key": "ok"}})["value"]["key"] == "ok"


def test_a_host_tool_gets_what_is_left_of_the_asking_calls_time(ex: Executor) -> None:
    with ex.session(dict, host_tools=["slow"], checkpoint=True) as s:
        t0 = time.monotonic()
        r = s.run([ToolCall("t", "ask", {"name": "slow", "arguments": {"seconds": 30}}, timeout=2)])[0]
        assert time.monotonic() - t0 < 20
        assert r.status == "timeout", r  # the asking call's own timeout: the host tool ran out with it
        assert r.name == "ask" and "tool 'ask'" in r.error.message, r  # the asking call's, not the host tool's
        assert s.restores == 1 and s.lost is None  # its checkpoint took over
        assert _one(s, "ask", {"name": "slow", "arguments": {"seconds": 0}})["value"] == "done"


def test_a_sandboxed_session_reaches_through_its_host_tools_only(ex: Executor, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    target = tmp_path / "marked"
    limits = Limits(network=False, write_paths=[str(ws)])
    with ex.session(dict, limits=limits, host_tools=["lookup"], checkpoint=True) as s:
        got = _one(s, "ask", {"name": "lookup", "arguments": {"key": "inside"}})
        assert got["value"]["key"] == "inside" and got["pid"] < 10  # asked from the sandbox's own pid namespace
        got = _one(s, "ask", {"name": "mark", "arguments": {"path": str(target)}})
        assert "is not one this session may" in got["error"] and not target.exists()


def test_modes_without_a_line_to_the_host_refuse_at_open() -> None:
    with Executor(TOOLS, mode="sequential") as seq, pytest.raises(SessionUnavailable, match="host_tools"):
        seq.session(dict, host_tools=["lookup"])
    assert not RayBackend.capabilities.host_calls and "actors" in RayBackend.capabilities.refusal("host_calls")
    with Executor(TOOLS, mode="fork", workers=1) as e:
        with pytest.raises(TypeError, match="not the string"):
            e.session(dict, host_tools="lookup")
        with pytest.raises(TypeError, match="non-empty strings"):
            e.session(dict, host_tools=[""])


@tool
def forge_host_call(runtime: ToolRuntime) -> str:
    """A pool call that writes a HOST_CALL frame for itself, as a hostile tool could."""
    from toolfork.executor.wire import frames

    runtime._writer.send(frames.host_call_frame(runtime._seq, "mark", {"path": "/nonexistent/x"}))  # type: ignore[attr-defined]
    return "sent"


def test_a_host_call_forged_in_the_pool_fails_its_own_call_only(tmp_path: Path) -> None:
    with Executor([*TOOLS, forge_host_call], mode="fork", workers=1) as e:
        forged, after = e.run([ToolCall("f", "forge_host_call", {}), ToolCall("n", "lookup", {"key": "next"})])
        assert forged.status == "error" and forged.error is not None and forged.error.type == "ChannelDamaged"
        assert "only a call of a session opened with host_tools" in forged.error.message
        assert after.status == "ok" and after.output.data["key"] == "next"
        assert after.output.data["pid"] != forged.worker_pid  # its worker was replaced
