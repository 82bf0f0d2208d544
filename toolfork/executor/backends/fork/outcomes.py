"""What the host says about a call whose process could not say it: the results the host makes itself.

Why a module of its own: a worker answers for its own calls (``wire.frames`` rebuilds what it sent);
when it cannot (it passed its deadline, it died, it hit a limit the kernel enforces by a signal, or it
never got to start the call) the host writes the result, by these rules, for every process a call runs
in (the pool's workers, one-shots, the line lane's, a session's process)::

    wait status ──> describe_exit ──> (type, message) ──┬─> crashed_result  ("crashed")
                                                         └─> limit_result    ("error", LimitExceeded)
                     death_result: which of the two, from the call's Limits (``rlimits.classify``)
    deadline passed ──> timeout_result ("timeout")
    workers kept dying before it started ──> not_started_result ("crashed")
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

from toolfork.executor import invoke
from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire import frames
from toolfork.governance import rlimits

if TYPE_CHECKING:
    from toolfork.governance.limits import Limits


def describe_exit(status: int | None) -> tuple[str, str]:
    """(error type, message) for a worker's wait status."""
    if status is None:
        return "WorkerCrashed", "the worker process died (exit status unknown)"
    said = frames.exit_description(os.WEXITSTATUS(status)) if os.WIFEXITED(status) else None
    if said is not None:
        return "WorkerCrashed", f"the worker process left: {said}"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = " (the OOM killer sends SIGKILL)" if sig == signal.SIGKILL else ""
        return "WorkerCrashed", f"the worker process was killed by {name}{hint}"
    return "WorkerCrashed", f"the worker process exited with code {os.WEXITSTATUS(status)}"


def timeout_result(call_id: str, name: str, timeout: float | None, pid: int | None, duration: float) -> ToolResult:
    return invoke.timeout_result(call_id, name, timeout, "its worker process was killed (SIGTERM, then SIGKILL "
                                 "after the grace period)", pid=pid, duration=duration)


def crashed_result(call_id: str, name: str, exit_description: tuple[str, str], pid: int | None,
                   duration: float) -> ToolResult:
    etype, message = exit_description
    return ToolResult(call_id, name, "crashed", duration_s=duration, worker_pid=pid,
                      error=ErrorInfo(etype, f"tool '{name}' crashed: {message}"))


def limit_result(call_id: str, name: str, hit: rlimits.LimitExceeded, exit_description: tuple[str, str],
                 pid: int | None, duration: float) -> ToolResult:
    """An item whose worker died of a limit it set (the kernel's SIGXCPU, SIGXFSZ)."""
    return ToolResult(call_id, name, "error", duration_s=duration, worker_pid=pid, error=ErrorInfo(
        hit.type, f"tool '{name}': {hit.message} ({exit_description[1]})"))


def death_result(call_id: str, name: str, status: int | None, exit_description: tuple[str, str],
                 limits: Limits | None, pid: int | None, duration: float) -> ToolResult:
    """The result of a call whose process died under it (wait ``status``, None: unknown): the limit it
    hit (``LimitExceeded``, the kernel's SIGXCPU or SIGXFSZ), else "crashed". The one rule for every
    process a call runs in."""
    hit = None if limits is None or status is None else rlimits.classify(status, limits)
    if hit is not None:
        return limit_result(call_id, name, hit, exit_description, pid, duration)
    return crashed_result(call_id, name, exit_description, pid, duration)


def not_started_result(call_id: str, name: str, requeues: int, pid: int | None) -> ToolResult:
    """An item whose workers kept dying before they could start it (``MAX_REQUEUES``)."""
    return ToolResult(call_id, name, "crashed", worker_pid=pid, error=ErrorInfo(
        "WorkerCrashed", f"tool '{name}' was not run: {requeues - 1} workers died before they could start it"))


__all__ = ["crashed_result", "death_result", "describe_exit", "limit_result", "not_started_result", "timeout_result"]
