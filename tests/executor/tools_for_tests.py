"""Tools the executor tests run: well-behaved ones and ones that fail in every way a tool can."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from toolfork.tools import ToolOutput, ToolRuntime, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def sleep_for(seconds: float, value: str = "") -> str:
    """Sleep, then return ``value``: an I/O-bound call that finishes when we say."""
    time.sleep(seconds)
    return value


@tool
def span(seconds: float) -> str:
    """Sleep; return when the call started and ended ("start end", wall-clock seconds)."""
    start = time.time()
    time.sleep(seconds)
    return f"{start:.4f} {time.time():.4f}"


@tool
def whoami() -> int:
    """The pid of the process the call ran in."""
    return os.getpid()


@tool
def fail(message: str) -> str:
    """Raise, so the call's result is an error."""
    raise ValueError(message)


@tool
def exit_now(code: int) -> str:
    """Leave the worker without cleanup, as a crashing native library would."""
    os._exit(code)


@tool
def segfault() -> str:
    """Dereference NULL (pytest's faulthandler, inherited by the worker, would print a dump: quiet it)."""
    import faulthandler

    faulthandler.disable()
    ctypes.string_at(0)
    return "unreachable"


@tool
def kill_self() -> str:
    """SIGKILL our own process (what the OOM killer does)."""
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)
    return "unreachable"


@tool
def hang(marker: str, child_pid_file: str = "", started: str = "") -> str:
    """Block forever; write ``marker`` from the finally block when the executor stops us.

    With ``child_pid_file``, first start a child process (sleep 600) and record its pid: the
    executor must kill it with us (it shares our process group). ``started`` is touched once running.
    """
    try:  # ``started`` is touched inside: a stop that comes as soon as it exists still runs the finally
        if started:
            Path(started).touch()
        if child_pid_file:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            _publish(child_pid_file, str(child.pid))
        while True:
            time.sleep(0.05)
    finally:
        _publish(marker, "finally ran")


def _publish(path: str, text: str) -> None:
    """Write then rename, so a test polling for the file never reads it half-written."""
    part = f"{path}.part"
    Path(part).write_text(text)
    os.replace(part, path)


@tool
def big(n: int) -> str:
    """Return ``n`` bytes of text."""
    return "x" * n


@tool
def unpicklable() -> ToolOutput:
    """Return an output whose data cannot cross a process boundary."""
    return ToolOutput(content=ToolOutput.text("lock").content, data=threading.Lock())


@tool
def progress(steps: int, pause: float, runtime: ToolRuntime) -> int:
    """Report ``steps`` progress values, then wait ``pause`` seconds."""
    for i in range(steps):
        runtime.emit_progress({"step": i})
    time.sleep(pause)
    return steps


@tool
def set_ctx(key: str, value: int, delay: float, runtime: ToolRuntime) -> str:
    """Wait ``delay``, then ask the host to merge ``{key: value}`` into its context."""
    time.sleep(delay)
    runtime.set_context({key: value})
    return runtime.call_id


@tool
def log_something(message: str) -> str:
    """Use the logging module (whose lock a host thread may hold when we fork)."""
    logging.getLogger("toolfork.tests").warning(message)
    return message


@tool
def count_attempts(counter_file: str, succeed_on: int) -> int:
    """Crash until the attempt number reaches ``succeed_on``: for ``retries``."""
    path = Path(counter_file)
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    if n < succeed_on:
        os._exit(9)
    return n



@tool
def wait_for_file(path: str, limit: float = 20.0) -> bool:
    """Wait until ``path`` exists (up to ``limit`` seconds): a call that can only finish after the
    test has seen something happen."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if Path(path).exists():
            return True
        time.sleep(0.01)
    return False


@tool
def rendezvous(directory: str, me: str, n: int, limit: float = 20.0) -> bool:
    """Arrive in ``directory`` and wait until ``n`` parties have: True proves that ``n`` calls were
    running at the same time (False if they never all were within ``limit`` seconds)."""
    Path(directory, me).touch()
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if len(os.listdir(directory)) >= n:
            return True
        time.sleep(0.005)
    return False


ALL = [add, sleep_for, whoami, fail, exit_now, segfault, kill_self, hang, big, unpicklable, progress,
       set_ctx, log_something, wait_for_file, rendezvous]
