"""The verdict of a sandboxed call's cgroup on its result, taken outside the sandbox.

Why in the host: the sandboxed process runs the tool, so anything it reports about its own limits a
hostile tool can forge (a child OOM-killed at the call's memory limit, the tool returning ``ok`` all
the same). The call's cgroup counts every process of the call, and nothing inside can write its files
(every cgroup mount is read-only there), so the host reads them when the result comes, and the group's
word overrules the call's:

    sandbox ── result ──> host: call_hit(template, one-shot pid, limits) ── "memory_mb" | "cpu_s" ──>
                                the result becomes LimitExceeded naming the limit
                          group gone already (the one-shot ended, its template removed the group):
                                the one-shot's exit status, which its template (or outer) set from
                                the same counters (``cgroup.ended_as``, ``CallGroup.watch``)
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.governance import cgroup, rlimits
from toolfork.governance.limits import Limits


def overruled(result: ToolResult, limits: Limits | None, template: int | None, pid: int | None,
              exit_status: Callable[[int], int | None]) -> ToolResult:
    """``result`` of a sandboxed one-shot (``pid``, forked by ``template``), or LimitExceeded when its
    processes together went past a limit of ``limits``. ``exit_status(pid)``: the one-shot's wait status,
    asked only when its group is gone."""
    if limits is None or template is None or pid is None or not cgroup.bounded(limits):
        return result
    if result.error is not None and result.error.type in ("LimitExceeded", "LimitsNotEnforceable"):
        return result  # named already; or refused before any group was made (the sandbox was not entered)
    try:
        over = cgroup.call_hit(template, pid, limits)
    except cgroup.GroupGone:
        over = _from_status(exit_status(pid), limits)
    if over is None:
        return result
    return ToolResult(result.call_id, result.name, "error", duration_s=result.duration_s, worker_pid=pid,
                      error=ErrorInfo("LimitExceeded", f"tool '{result.name}': "
                                      f"{rlimits.describe(over, getattr(limits, over))} (its processes together)"))


def _from_status(status: int | None, limits: Limits) -> str | None:
    """The limit a one-shot's exit status names (``cgroup.ended_as``, ``cgroup.CallGroup.watch``), if any."""
    if status is None:
        return None
    if limits.memory_mb is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == rlimits.CGROUP_OOM_EXIT:
        return "memory_mb"
    if limits.cpu_s is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return "cpu_s"
    return None


__all__ = ["overruled"]
