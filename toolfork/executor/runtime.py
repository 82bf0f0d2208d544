"""Concrete ``ToolRuntime`` for the places a call runs.

In a forked worker progress is written to the worker's result pipe at once, so the host sees it while
the call is still running; in the host (sequential and inline calls) it is queued and reported right
after the call, since the same thread that would report it is the one running the tool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolfork.tools.runtime import ToolRuntime


class CallbackRuntime(ToolRuntime):
    """A runtime whose progress goes to a callback ``(call_id, value) -> None``."""

    __slots__ = ("_on_progress",)

    def __init__(
        self,
        call_id: str,
        tool_name: str,
        deadline: float | None,
        context: dict[str, Any] | None,
        on_progress: Callable[[str, Any], None],
        meta: dict[str, str] | None = None,
    ) -> None:
        super().__init__(call_id, tool_name, deadline, context, meta)
        self._on_progress = on_progress

    def deliver_progress(self, value: Any) -> None:
        self._on_progress(self.call_id, value)


__all__ = ["CallbackRuntime"]
