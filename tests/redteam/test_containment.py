"""Red team #2, #3, #8: whatever a tool does with processes, it cannot outlive its call, hide its
worker's death, make a timeout look like deaths, or stop the pool by stopping the template."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.procs import alive as _alive
from tests.procs import gone as _gone
from toolfork.executor import Executor, ToolCall
from toolfork.tools import tool


def _wait_pid_file(path: Path, limit: float = 20.0) -> int:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            return int(path.read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.01)
    raise AssertionError(f"{path} was never written")


@tool
def start_daemon(pid_file: str, then: str = "return") -> str:
    """Double-fork a daemon in a session of its own (sleeps 600 s), then return, hang or exit."""
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            Path(pid_file + ".tmp").write_text(str(os.getpid()))
            os.rename(pid_file + ".tmp", pid_file)
            time.sleep(600)
        os._exit(0)
    os.waitpid(first, 0)
    while not os.path.exists(pid_file):
        time.sleep(0.005)
    if then == "hang":
        while True:
            time.sleep(0.05)
    return "started"


@tool
def helper_then_exit(pid_file: str, code: int = 3) -> str:
    """Fork a helper in our process group that keeps our pipes (sleeps 600 s), then die."""
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
        os._exit(0)
    Path(pid_file).write_text(str(pid))
    os._exit(code)


@tool
def maybe_hang(hang: bool) -> str:
    """Quick, or stuck forever."""
    while hang:
        time.sleep(0.05)
    return "quick"


@tool
def stop_parent() -> str:
    """SIGSTOP the process that forked this worker (the template)."""
    os.kill(os.getppid(), signal.SIGSTOP)
    return "stopped it"


@tool
def crash() -> str:
    """Die at once."""
    os._exit(9)


@tool
def echo(x: int) -> int:
    """Return x."""
    return x


TOOLS = [start_daemon, helper_then_exit, maybe_hang, stop_parent, crash, echo]


@pytest.mark.timeout(60)
def test_a_setsid_daemon_dies_at_its_calls_timeout(tmp_path):
    pid_file = tmp_path / "daemon.pid"
    with Executor(TOOLS, mode="fork", workers=2, kill_grace=0.2) as ex:
        r = ex.run([ToolCall("d", "start_daemon", {"pid_file": str(pid_file), "then": "hang"}, timeout=1.0)])[0]
        assert r.status == "timeout"
        daemon = _wait_pid_file(pid_file)
        assert _gone(daemon), "the daemon the call started outlived the call's timeout"
        assert ex.run([ToolCall("e", "echo", {"x": 5})])[0].output.data == 5


@pytest.mark.timeout(60)
def test_a_setsid_daemon_of_a_finished_call_dies_at_close(tmp_path):
    pid_file = tmp_path / "daemon.pid"
    ex = Executor(TOOLS, mode="fork", workers=2)
    try:
        r = ex.run([ToolCall("d", "start_daemon", {"pid_file": str(pid_file)})])[0]
        assert r.status == "ok"
        daemon = _wait_pid_file(pid_file)
        assert _alive(daemon)  # a call may leave work running while the pool lives...
    finally:
        ex.close()
    assert _gone(daemon), "...but nothing it started survives close()"


@pytest.mark.timeout(60)
def test_a_worker_death_is_reported_although_its_helper_holds_the_pipe(tmp_path):
    pid_file = tmp_path / "helper.pid"
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        results = ex.run([ToolCall("h", "helper_then_exit", {"pid_file": str(pid_file)}),
                          ToolCall("e", "echo", {"x": 1})])
        # Without the template's report the result would wait for the helper's 600 s sleep.
        assert results[0].status == "crashed" and "code 3" in results[0].error.message
        assert results[1].output.data == 1
        helper = _wait_pid_file(pid_file)
        assert _gone(helper), "the helper (it ignores SIGTERM) outlived its worker"


@pytest.mark.timeout(60)
def test_a_helper_ignoring_sigterm_dies_at_the_timeout(tmp_path):
    pid_file = tmp_path / "helper.pid"

    with Executor(TOOLS, mode="fork", workers=2, kill_grace=0.2) as ex:
        # The daemon ignores SIGTERM and lives in its own session: only the template can reach it. 3 s: a
        # loaded machine may take seconds to start it, and a call stopped before would leave no daemon.
        r = ex.run([ToolCall("d", "start_daemon", {"pid_file": str(pid_file), "then": "hang"}, timeout=3.0)])[0]
        assert r.status == "timeout"
        assert _gone(_wait_pid_file(pid_file))


@pytest.mark.timeout(90)
def test_a_timeout_is_not_counted_as_a_worker_death():
    """A tool quick for 200 calls then stuck on every call: each call is a timeout, none is reported
    as "not run: N workers died", and once it has hung the tool is no longer sent in chunks."""
    with Executor(TOOLS, mode="fork", workers=2, kill_grace=0.1) as ex:
        assert {r.status for r in ex.run([ToolCall(f"q{i}", "maybe_hang", {"hang": False}) for i in range(200)])} \
            == {"ok"}
        results = ex.run([ToolCall(f"h{i}", "maybe_hang", {"hang": True}, timeout=0.2) for i in range(20)])
        assert [r.status for r in results] == ["timeout"] * 20, [(r.status, r.error) for r in results]
        assert not any("died" in r.error.message for r in results)
        assert ex.run([ToolCall("e", "echo", {"x": 2})])[0].output.data == 2


@pytest.mark.timeout(90)
def test_a_stopped_template_is_replaced_and_the_next_batch_returns():
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        template = ex.backend.template_pid
        assert ex.run([ToolCall("s", "stop_parent")])[0].output.as_text() == "stopped it"
        end = time.monotonic() + 10  # seen stopped within a second (the pool's watcher looks), then replaced
        while ex.backend.template_pid == template and time.monotonic() < end:
            time.sleep(0.05)
        assert ex.backend.template_pid != template and not psutil.pid_exists(template)
        # A crash needs a replacement worker, which only the (new) template can start; no timeouts anywhere.
        results = ex.run([ToolCall("c", "crash"), *[ToolCall(f"e{i}", "echo", {"x": i}) for i in range(6)]])
        assert results[0].status == "crashed"
        assert [r.output.data for r in results[1:]] == list(range(6))
        assert ex.run([ToolCall("c2", "crash"), ToolCall("e", "echo", {"x": 7})])[1].output.data == 7
