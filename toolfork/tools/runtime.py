"""What a running tool may ask of the executor, without importing it.

A tool that declares a parameter annotated ``ToolRuntime`` receives one at call time. The executor
(in the worker, or in the host for inline and sequential calls) supplies a concrete subclass; the tool
layer only knows this interface, so ``toolfork.tools`` never imports ``toolfork.executor``.

What the agent adds (``run_id``, ``agent_id``, ``step_index``) rides in the batch's context under a
reserved key, which every backend already sends to where the call runs (a forked worker, a Ray task);
the runtime takes it out of ``context`` here, so a tool never sees it there. ``tool_call`` is set by
the executor's call wrapper (``toolfork.executor.invoke``) from the call it runs. What a tool asks of
the next model request (``set_next_turn_params``) goes back the same way, in ``context_updates``.
"""

from __future__ import annotations

import time
from typing import Any

# Reserved context keys: the agent's identity for the batch (host -> call), and what a call asks of the
# next model request (call -> host). Neither is ever visible in ``ToolRuntime.context``.
AGENT_CONTEXT_KEY = "__toolfork_agent__"
NEXT_TURN_KEY = "__toolfork_next_turn__"
NEXT_TURN_PARAMS: tuple[str, ...] = ("model", "temperature", "tool_choice", "instructions")


class ToolRuntime:
    """The per-call handle a tool gets: identity, deadline, progress and context updates.

    ``deadline`` is a ``time.monotonic()`` value (the clock is system-wide on Linux, so it means the
    same in the worker and the host) or None when the call is unbounded.
    """

    __slots__ = ("agent_id", "call_id", "context", "context_updates", "deadline", "run_id", "step_index",
                 "tool_call", "tool_name")

    def __init__(
        self,
        call_id: str,
        tool_name: str = "",
        deadline: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        self.call_id = call_id
        self.tool_name = tool_name
        self.deadline = deadline
        # A snapshot of the host's context when the batch was dispatched (read-only by convention).
        self.context: dict[str, Any] = dict(context) if context else {}
        # What this call asked the host to merge, returned with its result (None: nothing asked).
        self.context_updates: dict[str, Any] | None = None
        # Set when an agent runs the call (None under a bare Executor): the chat() run, the agent, and
        # the 0-based index of the model step whose answer asked for this call.
        agent = self.context.pop(AGENT_CONTEXT_KEY, None)
        self.context.pop(NEXT_TURN_KEY, None)
        meta = agent if isinstance(agent, dict) else {}
        self.run_id: str | None = meta.get("run_id")
        self.agent_id: str | None = meta.get("agent_id")
        self.step_index: int | None = meta.get("step_index")
        # The ToolCall being run (id, name, raw arguments); set by the executor before the tool runs.
        self.tool_call: Any = None

    def remaining(self) -> float | None:
        """Seconds left before the executor kills this call, or None when unbounded."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def emit_progress(self, value: Any) -> None:
        """Report progress; the host sees it live as a ``CallProgress`` event. No-op by default."""

    def set_context(self, updates: dict[str, Any]) -> None:
        """Ask the host to merge ``updates`` into its context (in call order, last call wins)."""
        if self.context_updates is None:
            self.context_updates = {}
        self.context_updates.update(updates)
        self.context.update(updates)

    def set_next_turn_params(self, **params: Any) -> None:
        """Change the next model request of the agent run: ``model``, ``temperature``, ``tool_choice``
        (``"auto"``, ``"required"``, ``"none"`` or a tool name) and ``instructions`` (replaces the system
        prompt for that request). Applies to the one request after this batch; calls of one batch merge in
        call order (last wins). Ignored outside an agent."""
        unknown = sorted(set(params) - set(NEXT_TURN_PARAMS))
        if unknown:
            raise ValueError(f"set_next_turn_params: unknown parameter(s) {', '.join(unknown)} "
                             f"(valid: {', '.join(NEXT_TURN_PARAMS)})")
        for key, value in params.items():
            if key == "temperature":
                ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
            else:
                ok = value is None or (isinstance(value, str) and bool(value))
            if not ok:
                want = "a number" if key == "temperature" else "a non-empty string"
                raise ValueError(f"set_next_turn_params: {key} must be {want} or None, got {value!r}")
        if self.context_updates is None:
            self.context_updates = {}
        merged = dict(self.context_updates.get(NEXT_TURN_KEY) or {})
        merged.update(params)
        self.context_updates[NEXT_TURN_KEY] = merged


__all__ = ["AGENT_CONTEXT_KEY", "NEXT_TURN_KEY", "NEXT_TURN_PARAMS", "ToolRuntime"]
