"""The error policy: what the model gets back when a call fails, and whether the run fails too.

Order: the agent's ``tool_error_handler(exc, tool)`` first (a non-None value becomes the result);
when it declines (returns None) the tool's ``on_error`` decides: "return-to-model" sends
``{"error": ...}`` back to the model, "fail-run" (the default) fails the run once the batch is done.
The same order applies to failures, timeouts and crashes. A call over its max-runs budget goes to
the handler only: when it declines, ``ToolRunsExceeded`` fails the run whatever ``on_error`` says
(the budget guards against a model looping on a tool, which returning errors to it would feed).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from toolfork.tools.output import ContentBlock, ToolOutput

logger = logging.getLogger("toolfork.agent")

ErrorHandler = Callable[[BaseException, Any], Any]

RETURN_TO_MODEL = "return-to-model"
FAIL_RUN = "fail-run"
ON_ERROR_VALUES = (FAIL_RUN, RETURN_TO_MODEL)


def error_output(message: str) -> ToolOutput:
    """``{"error": message}`` as the model sees it, flagged as an error (Anthropic ``is_error``)."""
    payload = {"error": message}
    return ToolOutput(content=[ContentBlock(type="text", text=json.dumps(payload, ensure_ascii=False))],
                      is_error=True, data=payload)


def apply_policy(exc: BaseException, tool: Any, handler: ErrorHandler | None, use_on_error: bool = True
                 ) -> tuple[ToolOutput, BaseException | None]:
    """Returns (what the model sees, the exception that fails the run or None)."""
    if handler is not None:
        try:
            value = handler(exc, tool)
        except Exception as handler_exc:
            logger.warning("tool_error_handler raised on %s: %r", getattr(tool, "name", "?"), handler_exc)
            return error_output(str(exc)), handler_exc
        if value is not None:
            return ToolOutput.from_value(value), None
    on_error = getattr(tool, "on_error", FAIL_RUN) or FAIL_RUN
    if use_on_error and on_error == RETURN_TO_MODEL:
        return error_output(str(exc)), None
    return error_output(str(exc)), exc


__all__ = ["FAIL_RUN", "ON_ERROR_VALUES", "RETURN_TO_MODEL", "ErrorHandler", "apply_policy", "error_output"]
