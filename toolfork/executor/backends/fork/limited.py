"""What a worker does around a call that runs under ``Limits``: enter its restrictions, lower its
rlimits for the call, and name the limit the call hit.

Why in the worker, around ``execute_call``: the limits bind the process that runs the tool, and only
the worker sees what the tool raised (MemoryError, OSError(EFBIG), the SIGXCPU it was sent). So:

* rlimits (memory_mb, cpu_s, file_size_mb, open_files, processes) are the worker's soft limits for the
  calls that have them (``governance.rlimits.applied``, kept in place while the next call has the same
  limits; the worker's own put back before a call under other limits or none, and at the end of each
  frame of calls: ``release``), so a warm worker serves limited and unlimited tools alike; an exception
  that stands for a limit, or a limit signal the tool swallowed, makes the call's result an error of
  type ``LimitExceeded`` naming the limit and its value.
  A worker that dies of one (SIGXCPU past the first warning) is named the same way by the host
  (``WorkerCore.crashed``).
* a sandboxed call (``Limits.sandboxed``: network=False, read_paths, write_paths, sandbox=True) runs in
  a one-shot worker that entered its sandbox when it was forked from the template, before any tool or
  hook code (``governance.sandbox.enter``, from ``worker_main``). Here its rlimits are made hard for
  good (``sandbox.lock_rlimits``; a spare does it while it waits for its call, off the call's path:
  ``CallLimits.ahead``), and the kernel's ENOMEM counts as the memory limit; what its cgroup
  counted for all its processes (an OOM kill, CPU past cpu_s) the host reads, outside the sandbox
  (``fork.group_verdict``): nothing the call does can forge it. As a guard, a
  sandboxed call in a process that did not enter its very sandbox is refused, not run, and so is an
  unsandboxed call in a sandbox.

Each tool's effective limits are worked out once per worker, by the rule the host uses
(``governance.effective``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.governance import rlimits, sandbox
from toolfork.governance.effective import EffectiveLimits
from toolfork.governance.limits import Limits

RunCall = Callable[[Callable[[BaseException], ErrorInfo | None] | None], ToolResult]


class OverLaid(EffectiveLimits):
    """A sandboxed session's rule: its Limits laid over each tool's effective limits (the session's
    fields win)."""

    __slots__ = ("over",)

    def __init__(self, default: Limits | None, over: Limits) -> None:
        super().__init__(default)
        self.over = over

    def resolve(self, tool: Any) -> Limits | None:
        return self.over.merged_over(super().resolve(tool))


class CallLimits:
    """One worker's view of limits: each tool's effective limits, and the restrictions it entered."""

    __slots__ = ("_ahead", "effective", "entered", "session")

    def __init__(self, default: Limits | None, entered: Limits | None = None, *, over: Limits | None = None) -> None:
        # ``of(tool)``, ``forget()``: the host's rule (a sandboxed session's: ``over`` laid over it)
        self.effective = EffectiveLimits(default) if over is None else OverLaid(default, over)
        # the restriction key of the sandbox this process entered for good, or None
        self.entered: Any = None if entered is None else entered.restriction_key
        # a sandboxed session's process serves many calls: its rlimits per call, its cgroup for the
        # session and its keeper per call (fork.session_keeper), not made hard for one call
        self.session = over is not None
        # a one-shot spare's limits, put in place while it waited for its call (``ahead``)
        self._ahead: tuple[Limits, rlimits.Applied] | None = None

    def ahead(self, limits: Limits) -> None:
        """A one-shot sandbox's call limits put in place before its call comes (a spare, while it waits
        for it: off the call's path): its rlimits made hard for good, the limit signals' handlers and
        the CPU timer, all that ``run`` does at a call's start. ``run`` takes them for a call under these
        very limits. Not with ``open_files`` (its count must include the call's channels, which are not
        here yet); where they cannot be set, nothing is kept and ``run`` tries again at the call (and
        refuses it, naming why)."""
        if self.session or limits.restriction_key is None or limits.restriction_key != self.entered \
                or limits.open_files is not None:
            return
        try:
            sandbox.lock_rlimits(limits)
            self._ahead = limits, rlimits.applied(limits, locked=True).__enter__()
        except (OSError, ValueError):
            self._ahead = None

    def run(self, limits: Limits, call_id: str, name: str, pid: int, run: RunCall) -> ToolResult:
        """Run one call (``run(limit_hit)`` calls ``execute_call``) under ``limits``."""
        key = limits.restriction_key
        if key != self.entered:
            why = ("its sandbox is not this process's (a routing error)" if key is not None else
                   "this process is a sandbox made for other calls (a routing error)")
            return _refused(call_id, name, pid, why)
        state: rlimits.Applied | None = None

        def limit_hit(exc: BaseException) -> ErrorInfo | None:
            if key is not None and limits.memory_mb is not None and sandbox.out_of_memory(exc):
                return _named(name, rlimits.LimitExceeded("memory_mb", limits.memory_mb,
                                                          rlimits.describe("memory_mb", limits.memory_mb)))
            return _named(name, state.classify(exc) if state is not None else None)

        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] != limits:  # not the call its spare was made for: the usual path
            ahead[1].__exit__(None, None, None)
            ahead = None
        try:
            if ahead is not None:  # in place since the spare waited for this call (``ahead``)
                state = ahead[1]
                try:
                    result = run(limit_hit)
                finally:
                    state.__exit__(None, None, None)
            else:
                one_shot = key is not None and not self.session
                if one_shot:
                    try:
                        sandbox.lock_rlimits(limits)
                    except (OSError, ValueError) as exc:
                        return _refused(call_id, name, pid, f"its limits could not be made hard: {exc}")
                with rlimits.applied(_without_cpu(limits) if self.session else limits,
                                     keep=key is None or self.session,  # kept for the next call (see rlimits)
                                     locked=one_shot) as state:
                    result = run(limit_hit)
        except rlimits.LimitExceededError as exc:  # the signal came between the tool and its result
            result = ToolResult(call_id, name, "error", worker_pid=pid,
                                error=ErrorInfo("LimitExceeded", f"tool '{name}': {exc}"))
        except OSError as exc:  # the limits themselves could not be set (the tool's own errors are results)
            return _refused(call_id, name, pid, f"its limits could not be applied: {exc}")
        hit = state.classify(None) if state is not None else None  # a limit signal the tool caught
        if hit is not None and (result.error is None or result.error.type != "LimitExceeded"):
            result = ToolResult(call_id, name, "error", duration_s=result.duration_s, worker_pid=pid,
                                error=ErrorInfo(hit.type, f"tool '{name}': {hit.message}"))
        return result  # what its cgroup counted for all its processes, the host adds (``fork.group_verdict``)


def _without_cpu(limits: Limits) -> Limits:
    """A sandboxed session's rlimits: cpu_s is its keeper's, for every process of the call (an rlimit
    would bind one, and its hard limit could not be put back in the sandbox's user namespace)."""
    if limits.cpu_s is None:
        return limits
    plain = _NO_CPU.get(limits)
    if plain is None:
        plain = _NO_CPU[limits] = limits.model_copy(update={"cpu_s": None})
    return plain


_NO_CPU: dict[Limits, Limits] = {}


def _named(name: str, hit: rlimits.LimitExceeded | None) -> ErrorInfo | None:
    return None if hit is None else ErrorInfo(hit.type, f"tool '{name}': {hit.message}")


def _refused(call_id: str, name: str, pid: int, why: str) -> ToolResult:
    return ToolResult(call_id, name, "error", worker_pid=pid,
                      error=ErrorInfo("LimitsNotEnforceable", f"tool '{name}' was not run: {why}"))


__all__ = ["CallLimits"]
