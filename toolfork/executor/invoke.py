"""Run one call where it is executed: hooks, the tool, and the outcome as a ToolResult.

Every backend calls ``execute_call`` in its worker (a forked process, a Ray task, or the host for the
sequential backend), so the hook rules of the executor contract live in one place:

* ``before_child`` raising: the tool does not run, ``after_child`` does not run, the result is an
  error naming the hook;
* ``after_child`` runs in a ``finally`` after the tool; if it raises, the call's result becomes an
  error naming the hook (the tool's own error, if any, is kept in the message).

A tool (or hook) that calls ``sys.exit(code)`` gets an "error" result of type ``SystemExit`` naming the
code, in every mode: in a fork worker it would otherwise end the worker ("crashed"), and in the host
(sequential mode, inline tools) it would end the whole program in the middle of a batch.
``GeneratorExit`` raised by a tool is an error too. What the executor itself uses to stop a call is
not caught here: ``CallInterrupted`` (the fork worker's SIGTERM and the sequential backend's SIGALRM
raise it at a deadline) and ``KeyboardInterrupt`` (Ctrl-C in the host; Ray's cancel at a deadline)
propagate, after ``after_child`` has run.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from toolfork.executor.types import ErrorInfo, ToolCall, ToolResult

if TYPE_CHECKING:
    from toolfork.tools.output import ToolOutput
    from toolfork.tools.runtime import ToolRuntime
    from toolfork.tools.tool import Tool

Hook = Callable[[], Any]

# What a tool or hook may raise and still get a result: every Exception, plus the BaseExceptions that
# are a tool's own doing rather than the executor's way of stopping it (see the module docstring).
CAUGHT: tuple[type[BaseException], ...] = (Exception, SystemExit, GeneratorExit)


class CallInterrupted(BaseException):
    """Raised inside a tool when the executor stops it (deadline passed, executor closing).

    A BaseException so that a tool's ``except Exception`` does not swallow it, while its ``finally``
    blocks still run.
    """


def error_info(exc: BaseException, *, prefix: str = "") -> ErrorInfo:
    """Describe an exception with strings only: exceptions themselves may not survive pickling."""
    if isinstance(exc, SystemExit):
        message = _exit_message(exc)
    else:
        try:
            message = str(exc)
        except Exception as str_exc:  # a broken __str__ must not break the worker
            message = f"<unprintable {type(exc).__name__}: {type(str_exc).__name__}>"
    if prefix:
        message = f"{prefix}: {message}" if message else prefix
    try:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:
        tb = ""
    return ErrorInfo(type=type(exc).__name__, message=message, traceback=tb)


def execute_call(
    tool: Tool,
    call_id: str,
    arguments: Mapping[str, Any],
    runtime: ToolRuntime | None,
    before_child: Hook | None = None,
    after_child: Hook | None = None,
    worker_pid: int | None = None,
    limit_hit: Callable[[BaseException], ErrorInfo | None] | None = None,
) -> ToolResult:
    """Run ``tool`` once with the hook rules above; never raises an ``Exception``, ``SystemExit`` or
    ``GeneratorExit``. ``limit_hit`` (a call under ``Limits``) names the limit an exception of the
    tool stands for (MemoryError, EFBIG...), which then is the call's error.

    ``CallInterrupted`` (and other BaseExceptions such as KeyboardInterrupt) propagate after
    ``after_child`` has run, so the caller decides what an interrupted call means.
    """
    name = tool.name
    start = time.perf_counter()
    if runtime is not None:
        runtime.tool_call = ToolCall(call_id, name, dict(arguments))
    if before_child is not None:
        hook_error = _hook_failed("before_child", before_child)
        if hook_error is not None:
            return ToolResult(call_id, name, "error", error=hook_error, duration_s=time.perf_counter() - start,
                              worker_pid=worker_pid)
    result: ToolResult | None = None
    try:
        # A ToolOutput with is_error set is still "ok": the tool ran and chose to report a failure
        # the model can act on (the agent forwards it); "error" is reserved for exceptions.
        output = tool.invoke(arguments, runtime)  # every caller passes a runtime only where the tool uses one
        result = ToolResult(call_id, name, "ok", output=output)
    except CAUGHT as exc:
        hit = limit_hit(exc) if limit_hit is not None else None
        result = ToolResult(call_id, name, "error", error=hit if hit is not None else error_info(exc))
    finally:
        if after_child is not None:
            hook_error = _hook_failed("after_child", after_child)
            if hook_error is not None:
                if result is not None and result.error is not None:
                    hook_error.message += f" (the tool had failed too: {result.error})"
                result = ToolResult(call_id, name, "error", error=hook_error)
    assert result is not None  # a BaseException from the tool propagated past the finally otherwise
    result.duration_s = time.perf_counter() - start
    result.worker_pid = worker_pid
    if runtime is not None and runtime.context_updates:
        result.context_updates = runtime.context_updates
    return result


def timeout_result(call_id: str, name: str, timeout: float | None, how: str, *, pid: int | None,
                   duration: float, output: ToolOutput | None = None) -> ToolResult:
    """The "timeout" result of a call that passed its deadline, in every mode; ``how``: what was done
    about it (its worker killed, its Ray task cancelled, ...)."""
    return ToolResult(call_id, name, "timeout", output=output, duration_s=duration, worker_pid=pid, error=ErrorInfo(
        "TimeoutError", f"tool '{name}' did not finish within its timeout of {timeout}s; {how}"))


def _exit_message(exc: SystemExit) -> str:
    """``sys.exit(0)`` has an empty ``str``; say what happened, with the code, whatever it is."""
    try:
        code = repr(exc.code)
    except Exception:
        code = "<unprintable>"
    return f"sys.exit({code}) was called: the call fails with this error instead of ending the process"


def _hook_failed(which: str, hook: Hook) -> ErrorInfo | None:
    """Run the user's hook ``which`` (before_child, after_child) around a call; its failure, named with
    the hook, or None."""
    try:
        hook()
    except CAUGHT as exc:
        name = getattr(hook, "__qualname__", None) or repr(hook)
        return error_info(exc, prefix=f"{which} hook {name} failed")
    return None


__all__ = ["CAUGHT", "CallInterrupted", "error_info", "execute_call", "timeout_result"]
