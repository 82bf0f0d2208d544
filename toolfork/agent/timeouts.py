"""Honest results for timeouts the executor cannot enforce.

A call that runs in the host (the sequential executor, or an ``inline`` tool) is stopped at its
deadline with ``SIGALRM``, which only the main thread can receive. Anywhere else (an agent driven from
a worker thread, every async run: ``Executor.arun`` runs batches in a thread of their own) nothing can
stop a running Python function, so the call runs to its end, side effects included. Reporting it as
"timeout" would tell the model a call did not happen when it did, and a model that retries would do it
twice. So for such calls the agent lifts the timeout (``ToolCall.timeout = inf``: the executor's "no
limit") and, when the call overran, gives the model the real result with a note saying so.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from toolfork.executor.calls import effective_timeout
from toolfork.executor.types import ToolCall, ToolResult
from toolfork.tools.output import ContentBlock, ToolOutput

if TYPE_CHECKING:
    from toolfork.executor.backends.capabilities import Capabilities

logger = logging.getLogger("toolfork.agent")


def can_preempt_in_host() -> bool:
    """Whether a call run in the host by this thread can be stopped at its deadline."""
    return threading.current_thread() is threading.main_thread()


def lift_unenforceable(calls: Iterable[ToolCall], tools: Mapping[str, Any], capabilities: Capabilities,
                       default_timeout: float | None, preemptible: bool) -> dict[str, float]:
    """For calls that will run in the host where no deadline can be enforced (an inline tool, or a
    backend that cannot stop a call at its deadline: ``capabilities.kills_at_deadline``), remove the
    timeout and return ``{call_id: timeout}`` to check afterwards. Empty when every timeout can be
    enforced."""
    if preemptible:
        return {}
    lifted: dict[str, float] = {}
    for call in calls:
        tool = tools.get(call.name)
        if tool is None or (capabilities.kills_at_deadline and not getattr(tool, "inline", False)):
            continue
        timeout = effective_timeout(call.timeout, getattr(tool, "timeout", None), default_timeout)
        if timeout is None or not 0 < timeout < math.inf:
            continue
        lifted[call.id] = float(timeout)
        call.timeout = math.inf
    return lifted


def note_overrun(result: ToolResult, timeout: float | None) -> ToolResult:
    """The real result of a call whose timeout was lifted, with a note when it ran past it."""
    if timeout is None or result.duration_s <= timeout:
        return result
    note = (f"[note: this call ran for {result.duration_s:.2f}s, past its timeout of {timeout:g}s, which cannot "
            "be enforced for a call run in the host off the main thread; it ran to completion and this is its "
            "real result]")
    logger.warning("tool '%s' (call %s) ran %.2fs, past its %gs timeout, which could not be enforced here",
                   result.name, result.call_id, result.duration_s, timeout)
    if result.output is not None:
        out = result.output
        result.output = ToolOutput([*out.content, ContentBlock("text", note)], out.is_error, out.data)
    elif result.error is not None:
        result.error.message += f" {note}"
    return result


__all__ = ["can_preempt_in_host", "lift_unenforceable", "note_overrun"]
