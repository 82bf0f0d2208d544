"""What every adapter shares: which Executor runs the calls, unique call ids, and how a ``ToolResult``
reads as text to another framework's model.

Kept apart from the framework modules so it imports no framework: each adapter module imports only its
own framework, and only when it is imported itself.
"""

from __future__ import annotations

import itertools
import os
import pickle
import traceback
import warnings
from collections.abc import Iterable
from typing import Any

from toolfork.executor import Executor, ToolResult
from toolfork.tools.registry import collect_tools
from toolfork.tools.tool import Tool

_SEQ = itertools.count()


def call_id(hint: str | None = None) -> str:
    """An id unique among the calls of this process: frameworks reuse their own ids (scripted models,
    several agents on one Executor), while the Executor wants ids unique among the calls running."""
    return f"{hint or 'call'}~{os.getpid()}-{next(_SEQ)}"


def attach(tools: Iterable[Any], executor: Executor | None,
           options: dict[str, Any]) -> tuple[Executor, bool, dict[str, Tool]]:
    """The Executor an adapter runs on, whether the adapter owns it (and so closes it), and its tools.

    No executor: one is created here, now, with ``options`` (before the framework starts threads: the
    host forks once, when the pool starts). A given executor is shared: tools it lacks are added to it
    (shipped to its workers), tools it has by name are taken from it, so several adapters can list the
    same tools on one Executor."""
    wanted = collect_tools(list(tools))
    if executor is None:
        return Executor(list(wanted.values()), **options), True, wanted
    if options:
        raise TypeError(f"executor options ({', '.join(sorted(options))}) are for the Executor an adapter "
                        "creates; pass them to your Executor instead, or leave executor=None")
    known = executor.tools
    missing = [t for name, t in wanted.items() if name not in known]
    if missing:
        try:
            with warnings.catch_warnings():  # dill's own warnings precede the error this explains
                warnings.simplefilter("ignore")
                executor.add_tools(*missing)
        except Exception as exc:
            names = ", ".join(t.name for t in missing)
            raise ValueError(
                f"the shared Executor lacks tool(s) {names} and they could not be shipped to its running "
                f"workers ({type(exc).__name__}: {str(exc)[:200]}); create the Executor with these tools "
                "(workers inherit them by fork) and pass it again") from exc
        known = executor.tools
    return executor, False, {name: known[name] for name in wanted}


def result_text(result: ToolResult) -> str:
    """What the model reads: the output's text when the call succeeded, else one line saying how it
    failed (the traceback stays in ``ToolResult.error`` for the program, not the model)."""
    if result.status == "ok" and result.output is not None:
        return result.output.as_text()
    return failure_text(result)


def failure_reason(result: ToolResult) -> str:
    """How a call failed, in one line: ``ValueError: ...`` for an exception, the executor's own words
    for a timeout or a crash (they name the status)."""
    if result.error is None:
        if result.output is not None:
            return result.output.as_text()  # an error ToolOutput the tool returned on purpose
        return f"tool '{result.name}': {result.status}"
    if result.status == "error":
        return str(result.error)
    if result.status == "cancelled":
        return f"tool '{result.name}' was cancelled: {result.error.message}"
    return result.error.message


def failure_text(result: ToolResult) -> str:
    return f"Error: {failure_reason(result)}"


def result_value(result: ToolResult) -> Any:
    """Structured data when the tool returned some (frameworks that serialize results themselves keep
    numbers and objects as such), else the text."""
    output = result.output
    if output is not None and output.data is not None and not output.is_error:
        return output.data
    return result_text(result)


def is_input_error(result: ToolResult) -> bool:
    """The arguments did not fit the tool's schema: the model can fix this one by retrying."""
    return result.error is not None and result.error.type == "ToolInputError"


class SandboxRefused(RuntimeError):
    """A call whose limits sandbox it cannot go through this adapter (its function cannot be sent to a
    worker, or the adapter carries values pickled): it is not run, and never in the host."""


def sandboxed(executor: Executor, tool_name: str) -> bool:
    """Whether calls of ``tool_name`` on ``executor`` run in the sandbox tier (its limits say so)."""
    governance = executor.governance
    limits = governance.limits_for(tool_name) if tool_name in executor.tools else governance.default
    return limits is not None and limits.sandboxed


class UnrebuiltError(Exception):
    """A tool raised an exception the host could not rebuild (it does not pickle, or fails to unpickle).
    ``type_name``, ``message`` and ``traceback_text`` say what it was."""

    def __init__(self, type_name: str, message: str, traceback_text: str, why: str) -> None:
        self.type_name, self.message, self.traceback_text = type_name, message, traceback_text
        super().__init__(f"{type_name}: {message} (raised in a worker process; the host cannot rebuild this "
                         f"exception: {why}; make it picklable to see its own type here)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (UnrebuiltError, (self.type_name, self.message, self.traceback_text, "see above"))


def carry_exception(exc: BaseException) -> bytes:
    """``exc`` as bytes that ``rebuild_exception`` turns back into an exception of the same type, with
    the attributes set on it (pickle alone drops them for types that define ``__reduce__``, such as
    pydantic's ``ValidationError``), or into an ``UnrebuiltError`` that says why it could not be."""
    extra = {}
    for key, value in getattr(exc, "__dict__", {}).items():
        try:
            pickle.dumps(value)
        except Exception:
            continue
        extra[key] = value
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        body = pickle.dumps(exc)
        pickle.loads(body)
    except Exception as why:
        return pickle.dumps(("unrebuilt", type(exc).__name__, str(exc), tb, f"{type(why).__name__}: {why}"))
    return pickle.dumps(("exc", body, extra, tb))


def rebuild_exception(blob: bytes) -> BaseException:
    """The exception ``carry_exception`` packed (its traceback text, from the worker, as a note)."""
    record = pickle.loads(blob)
    if record[0] == "unrebuilt":
        return UnrebuiltError(*record[1:])
    _, body, extra, _tb = record
    try:
        exc: BaseException = pickle.loads(body)
    except Exception as why:  # a class the host lacks
        return UnrebuiltError("exception", "", _tb, f"{type(why).__name__}: {why}")
    for key, value in extra.items():
        try:
            setattr(exc, key, value)
        except Exception:
            pass
    if hasattr(exc, "add_note"):  # Python 3.11+: shown under the host's traceback
        exc.add_note(f"raised in a worker process:\n{_tb}")
    return exc


__all__ = [
    "SandboxRefused",
    "UnrebuiltError",
    "attach",
    "call_id",
    "carry_exception",
    "failure_reason",
    "failure_text",
    "is_input_error",
    "rebuild_exception",
    "result_text",
    "result_value",
    "sandboxed",
]
