"""The gate: everything decided about a batch in the host, in call order, before any call runs.

For each call: is the tool offered this turn (unknown / invisible -> error result naming the valid
tools), do its arguments validate (-> error result naming the failing fields), is a max-runs slot
left (reserved now, so a parallel batch counts exactly like a sequential one), is it the ToolSearch
tool (answered here, it only reads the catalog), does it need approval (the tool's own
``approval_policy``, else the agent's), and then, once approved: is it a frontend tool (handed to the
client), a manual tool (result supplied from outside), or a tool with ``on_tool_called`` (its value is
the result at once; None hands the call to a person). What is left goes to the executor in one ``run``.

Approval comes before every hand-off, so a consent gate on a device action (a frontend tool) or on a
person's answer holds like one on a local tool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from toolfork.agent.errors import ToolExecutionError, ToolRunsExceeded
from toolfork.agent.messages import ToolResultItem
from toolfork.agent.output_limit import limit_output
from toolfork.agent.policy import ErrorHandler, apply_policy, error_output
from toolfork.agent.runs import RunCounter
from toolfork.agent.special_tools import FrontendInputError
from toolfork.agent.state import APPROVAL, DONE, FRONTEND, HITL, MANUAL, RUN, CallSlot, PendingBatch
from toolfork.agent.toolset import Toolset
from toolfork.executor.types import ToolResult
from toolfork.tools.errors import ToolInputError
from toolfork.tools.output import ToolOutput

logger = logging.getLogger("toolfork.agent")

# An approval policy: True (always ask), False (never), None (no opinion) or (inputs) -> bool | str.
Policy = Any


def supplied_output(tool: Any, value: Any) -> ToolOutput:
    """A result that did not come from running the tool (``on_tool_called``'s value, a submitted
    result), checked against the tool's ``output_model`` like a returned value would be."""
    if getattr(tool, "output_model", None) is not None:
        return tool.checked_output(value)  # type: ignore[no-any-return]
    return ToolOutput.from_value(value)


class Gate:
    """Classifies a batch's calls (see module docstring). Stateless apart from what it is given."""

    def __init__(self, toolset: Toolset, counter: RunCounter, discovered: set[str],
                 handler: ErrorHandler | None, max_output_chars: int | None, approval_policy: Policy = None) -> None:
        self.toolset = toolset
        self.approval_policy = approval_policy
        self.counter = counter
        self.discovered = discovered
        self.handler = handler
        self.max_output_chars = max_output_chars

    def limit(self, tool: Any, output: ToolOutput) -> ToolOutput:
        own = getattr(tool, "max_output_chars", None)
        return limit_output(output, own if own is not None else self.max_output_chars)

    def classify(self, batch: PendingBatch) -> None:
        """Fill ``batch.slots``: results for calls answered here, a kind for the others."""
        available = self.toolset.available(self.discovered)
        batch.slots = [self._classify_one(call, available) for call in batch.assistant.tool_calls]
        batch.gated = True

    def _done(self, slot: CallSlot, output: ToolOutput, status: str) -> CallSlot:
        slot.kind = DONE
        slot.item = ToolResultItem(slot.call.id, slot.call.name, output, status)
        return slot

    def _classify_one(self, call: Any, available: dict[str, Any]) -> CallSlot:
        slot = CallSlot(call=call)
        tool = available.get(call.name)
        if tool is None:
            return self._done(slot, error_output(self._unknown_message(call.name, available)), "unknown-tool")
        if call.invalid_arguments is not None:
            raw = call.invalid_arguments if len(call.invalid_arguments) <= 200 else call.invalid_arguments[:200] + "..."
            message = f"Invalid arguments for tool '{call.name}': not a JSON object: {raw}"
            return self._done(slot, error_output(message), "invalid-arguments")
        try:
            validated = tool.validate(call.arguments)
        except Exception as exc:
            message = str(exc) if isinstance(exc, (ToolInputError, FrontendInputError)) \
                else f"Invalid arguments for tool '{call.name}': {type(exc).__name__}: {exc}"
            return self._done(slot, error_output(message), "invalid-arguments")

        granted, key, limit = self.counter.reserve(tool, validated)
        slot.run_key = key
        if not granted:
            over = ToolRunsExceeded(call.name, key, limit, call.id)
            output, failure = apply_policy(over, tool, self.handler, use_on_error=False)
            slot.failure = failure
            return self._done(slot, self.limit(tool, output), "max-runs")

        search = self.toolset.searches.get(call.name)
        if search is not None:
            text, names = search.answer(str(validated.get("query", "")), self.discovered)
            self.discovered.update(names)
            return self._done(slot, ToolOutput.text(text), "ok")
        own: Policy = getattr(tool, "approval_policy", None)
        policy: Policy = own if own is not None else self.approval_policy
        decision: Any = False
        if policy is True or policy is False:
            decision = policy
        elif policy is not None:
            try:
                decision = policy(validated)
            except Exception as exc:
                logger.warning("approval_policy of %s raised %r; asking for approval", call.name, exc)
                decision = f"approval_policy raised {type(exc).__name__}: {exc}"
        if decision:
            slot.kind = APPROVAL
            slot.reason = decision if isinstance(decision, str) else None
            return slot
        return self.route(slot, tool, validated)

    def route(self, slot: CallSlot, tool: Any, validated: dict[str, Any]) -> CallSlot:
        """Where an approved (or approval-free) call goes: the client, a person, or the executor."""
        slot.reason = None
        if slot.call.name in self.toolset.frontend:
            slot.kind = FRONTEND
            return slot
        if getattr(tool, "manual", False):
            slot.kind = MANUAL
            return slot
        hook: Callable[[dict[str, Any]], Any] | None = getattr(tool, "on_tool_called", None)
        if hook is None:
            slot.kind = RUN
            return slot
        try:
            value = hook(validated)
        except Exception as exc:  # fail closed, as a raising approval policy does: a person decides
            logger.warning("on_tool_called of %s raised %r; asking a person", slot.call.name, exc)
            slot.kind = HITL
            slot.reason = f"on_tool_called raised {type(exc).__name__}: {exc}"
            return slot
        if value is None:
            slot.kind = HITL
            return slot
        try:
            output = supplied_output(tool, value)
        except Exception as exc:
            output, failure = apply_policy(exc, tool, self.handler)
            slot.failure = failure
            return self._done(slot, self.limit(tool, output), "error")
        return self._done(slot, self.limit(tool, output), "ok")

    def after_approval(self, slot: CallSlot) -> CallSlot:
        """Route a call a person approved, as ``classify`` would have without the approval step."""
        name = slot.call.name
        tool: Any = self.toolset.frontend.get(name) or self.toolset.local.get(name)
        return self.route(slot, tool, tool.validate(slot.call.arguments))

    def _unknown_message(self, name: str, available: dict[str, Any]) -> str:
        valid = ", ".join(sorted(available)) or "(none)"
        if name in self.toolset.catalog:
            search = ", ".join(self.toolset.searches)
            return (f"Tool '{name}' is not available yet: find it with {search} first, then call it "
                    f"in your next turn. Valid tools now: {valid}.")
        return f"Unknown tool '{name}'. Valid tools: {valid}."

    def resolve(self, slot: CallSlot, result: ToolResult) -> None:
        """Turn the executor's result into what the model sees, applying the error policy."""
        tool = self.toolset.local.get(slot.call.name)
        slot.exec_result = result
        slot.announced = True  # the driver published the executor's CallFinished
        if result.status == "ok":
            output = result.output if result.output is not None else ToolOutput.text("")
            slot.item = ToolResultItem(slot.call.id, slot.call.name, self.limit(tool, output), "ok")
            return
        exc = ToolExecutionError(result)
        output, failure = apply_policy(exc, tool, self.handler)
        slot.failure = failure
        slot.item = ToolResultItem(slot.call.id, slot.call.name, self.limit(tool, output), result.status)


def not_executed(slot: CallSlot, why: str, status: str = "not-executed") -> None:
    slot.kind = DONE
    slot.item = ToolResultItem(slot.call.id, slot.call.name, error_output(f"Not executed: {why}"), status)


__all__ = ["Gate", "not_executed"]
