"""What a running tool may ask of the executor, without importing it.

A tool that declares a parameter annotated ``ToolRuntime`` receives one at call time. The executor
(in the worker, or in the host for inline and sequential calls) supplies a concrete subclass; the tool
layer only knows this interface, so ``toolfork.tools`` never imports ``toolfork.executor``.
"""

from __future__ import annotations

import time
from typing import Any


class ToolRuntime:
    """The per-call handle a tool gets: identity, deadline, progress and context updates.

    ``deadline`` is a ``time.monotonic()`` value (the clock is system-wide on Linux, so it means the
    same in the worker and the host) or None when the call is unbounded.
    """

    __slots__ = ("call_id", "context", "context_updates", "deadline", "tool_name")

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


__all__ = ["ToolRuntime"]
