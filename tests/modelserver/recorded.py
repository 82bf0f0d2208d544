"""What the server saw: every request, raw and through an API-independent view.

Agent tests assert on what the client sent back (tool results in call order, history pairs, the
system prompt); the views let one assertion work for all three API flavours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .common import ImageView, ToolCallView, ToolResultView
from .wire import WireFormat


@dataclass(eq=False)
class RecordedRequest:
    api: str  # "anthropic" | "openai-chat" | "openai-responses"
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON (a dict for any request that got past the JSON check)
    stream: bool
    wire: WireFormat = field(repr=False)
    status: int = 0  # HTTP status answered (200 also for a stream that carries a mid-stream error)
    rejection: str | None = None  # the 400 message when the request broke the API's rules

    def _view(self) -> tuple[WireFormat, dict[str, Any]]:
        return self.wire, self.body if isinstance(self.body, dict) else {}

    @property
    def model(self) -> str | None:
        _, body = self._view()
        value = body.get("model")
        return value if isinstance(value, str) else None

    @cached_property
    def messages(self) -> list[dict[str, Any]]:
        """The native message list (Anthropic `messages`, Chat `messages` incl. system ones,
        Responses `input` items, a str input wrapped as one user message)."""
        wire, body = self._view()
        return wire.messages(body)

    @cached_property
    def system(self) -> str:
        """The system prompt as text: Anthropic `system`, Chat system/developer messages,
        Responses `instructions` plus system/developer items."""
        wire, body = self._view()
        return wire.system(body)

    @cached_property
    def tools(self) -> list[str]:
        """Names of the tools offered (a hosted tool without a name is listed by its type)."""
        wire, body = self._view()
        return wire.tool_names(body)

    @cached_property
    def tool_calls(self) -> list[ToolCallView]:
        """Tool calls in the history the client sent, in order."""
        wire, body = self._view()
        return wire.tool_calls(body)

    @cached_property
    def tool_results(self) -> list[ToolResultView]:
        """(call_id, content_text, is_error) for each tool result, in request order."""
        wire, body = self._view()
        return wire.tool_results(body)

    @cached_property
    def images(self) -> list[ImageView]:
        wire, body = self._view()
        return wire.images(body)
