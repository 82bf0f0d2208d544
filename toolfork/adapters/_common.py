"""What every adapter shares: which Executor runs the calls, unique call ids, and how a ``ToolResult``
reads as text to another framework's model.

Kept apart from the framework modules so it imports no framework: each adapter module imports only its
own framework, and only when it is imported itself.
"""

from __future__ import annotations

import itertools
import os
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


__all__ = ["attach", "call_id", "failure_reason", "failure_text", "is_input_error", "result_text", "result_value"]
