"""The sessions' supervisor (the process that forks every session's process) is a helper a session's tool
can reach: it is its parent. Stopped or killed, it is noticed within a second; calls running in other
sessions end with a status that names it, their deadlines hold, and the next sessions open."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from tests.redteam.session_scenarios import TOOLS, Account
from toolfork.executor import Executor, ToolCall, ToolResult

MARGIN = 5.0  # seconds: what a loaded machine may add to a deadline or to the second it takes to notice


@pytest.fixture
def ex() -> Iterator[Executor]:
    with Executor(TOOLS, mode="fork", workers=1, timeout=60, kill_grace=0.3) as executor:
        yield executor


def _in_thread(run: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def target() -> None:
        started = time.monotonic()
        try:
            out.append(run())
        except Exception as exc:
            out.append(exc)
        out.append(time.monotonic() - started)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


def _gone(pid: int, within: float) -> bool:
    try:
        psutil.Process(pid).wait(within)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return False
    return True


@pytest.mark.timeout(120)
def test_a_stopped_supervisor_keeps_no_deadline_waiting_and_later_sessions_open(ex: Executor) -> None:
    with ex.session(Account, "ada") as a, ex.session(Account, "bob") as b:
        assert b.pid is not None
        supervisor = psutil.Process(b.pid).ppid()
        t, out = _in_thread(lambda: b.run([ToolCall("s", "spin", {"seconds": 120}, timeout=1)])[0])
        time.sleep(0.2)  # the spin has started
        stopped = a.run([ToolCall("x", "signal_parent", {"sig": "SIGSTOP"})])[0]
        assert stopped.status == "ok" and stopped.output is not None and stopped.output.data == supervisor
        t.join(1 + MARGIN + 5)
        assert not t.is_alive(), "the call with timeout=1 is still waiting"
        result, took = out
        # At its deadline, or before it when the stopped supervisor is noticed first (its process dies with it)
        assert isinstance(result, ToolResult) and (result.status == "timeout" or (
            result.status == "crashed" and result.error is not None and "supervisor" in result.error.message)), result
        assert took < 1 + MARGIN, f"a timeout=1 call came back after {took:.1f}s"
        assert _gone(supervisor, MARGIN), "the stopped supervisor was left in place"
        assert _gone(b.pid, MARGIN)
    with ex.session(Account, "cyd") as c:  # a new supervisor forks it
        r = c.run([ToolCall("d", "deposit", {"amount": 1})])[0]
        assert r.status == "ok" and r.output is not None and r.output.as_text() == "cyd:1"
        assert c.pid is not None and psutil.Process(c.pid).ppid() != supervisor


@pytest.mark.timeout(120)
def test_a_killed_supervisor_ends_a_running_call_of_another_session_at_once(ex: Executor) -> None:
    with ex.session(Account, "ada") as a, ex.session(Account, "bob") as b:
        t, out = _in_thread(lambda: b.run([ToolCall("s", "spin", {"seconds": 120})])[0])  # its timeout: 60 s
        time.sleep(0.2)
        killed = a.run([ToolCall("x", "signal_parent", {"sig": "SIGKILL"})])[0]
        assert killed.status in ("ok", "crashed")  # its own process dies with its supervisor (maybe after answering)
        t.join(MARGIN + 5)
        assert not t.is_alive(), "the running call waits on a dead supervisor"
        result, took = out
        assert isinstance(result, ToolResult) and result.status == "crashed", result
        assert result.error is not None and "supervisor" in result.error.message, result
        assert took < 1 + MARGIN
    with ex.session(Account, "cyd") as c:
        assert c.run([ToolCall("d", "deposit", {"amount": 1})])[0].status == "ok"


@pytest.mark.timeout(120)
def test_opening_while_the_supervisor_is_stopped_gets_a_session_from_a_new_one(ex: Executor) -> None:
    with ex.session(Account, "ada") as a:
        assert a.pid is not None
        supervisor = psutil.Process(a.pid).ppid()
        os.kill(supervisor, signal.SIGSTOP)  # the spares it forked are there; the next ones would never come
        while psutil.Process(supervisor).status() != psutil.STATUS_STOPPED:  # (a signal lands a moment later)
            time.sleep(0.01)
        try:
            t, out = _in_thread(lambda: [ex.session(Account, f"s{i}") for i in range(4)])
            t.join(MARGIN + 10)
            assert not t.is_alive(), "opening waits on a stopped supervisor"
            sessions, _took = out
            assert not isinstance(sessions, Exception), sessions
            try:
                for i, s in enumerate(sessions):
                    r = s.run([ToolCall("d", "deposit", {"amount": 1})])[0]
                    assert r.status == "ok" and r.output.as_text() == f"s{i}:1", r
            finally:
                for s in sessions:
                    s.close()
        finally:
            try:
                os.kill(supervisor, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.timeout(120)
def test_closing_a_session_whose_tool_stopped_the_supervisor_returns_within_its_bound() -> None:
    """``close`` waits for the session's process to be gone (its supervisor ends it): a tool that stops
    the supervisor makes that wait last at most its bound, and the next session (max_sessions=1) opens."""
    with Executor(TOOLS, mode="fork", workers=1, timeout=60, kill_grace=0.3, max_sessions=1) as executor:
        s = executor.session(Account, "ada")
        stopped = s.run([ToolCall("x", "signal_parent", {"sig": "SIGSTOP"})])[0]
        assert stopped.status == "ok" and stopped.output is not None
        supervisor = stopped.output.data
        try:
            started = time.monotonic()
            s.close()
            took = time.monotonic() - started
            assert took < 2 + MARGIN, f"close waited {took:.1f}s on a stopped supervisor"
            with executor.session(Account, "bob") as b:
                r = b.run([ToolCall("d", "deposit", {"amount": 1})])[0]
                assert r.status == "ok" and r.output is not None and r.output.as_text() == "bob:1", r
        finally:
            try:
                os.kill(supervisor, signal.SIGKILL)
            except OSError:
                pass
