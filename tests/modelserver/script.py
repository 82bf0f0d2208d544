"""What a test scripts: one entry per model request, consumed in arrival order.

The same script drives every API flavour, so a test written against the Anthropic provider can be
re-run against OpenAI by changing only the provider: the wire modules translate a `Turn` into each
format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .recorded import RecordedRequest


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call the scripted model makes.

    `arguments` is normally a dict. A str is sent verbatim as the raw JSON text (OpenAI flavours and
    Anthropic streaming), which lets a test inject malformed arguments; Anthropic non-streaming parses
    it when it can, since that format carries an object rather than text.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"ToolCallSpec.id must be a non-empty str, got {self.id!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ToolCallSpec.name must be a non-empty str, got {self.name!r}")
        if not isinstance(self.arguments, (str, Mapping)):
            kind = type(self.arguments).__name__
            raise TypeError(f"ToolCallSpec.arguments must be a dict or a raw JSON str, got {kind}")

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), separators=(",", ":"))

    def arguments_value(self) -> Any:
        """The arguments as a JSON value; raw text that does not parse is returned as the text."""
        if not isinstance(self.arguments, str):
            return dict(self.arguments)
        try:
            return json.loads(self.arguments)
        except ValueError:
            return self.arguments


@dataclass(frozen=True)
class Turn:
    """A successful model answer: optional text first, then the tool calls in order.

    `delay` (seconds) is slept before answering, for client-timeout tests; the server interrupts it
    on close. `truncated` marks the output as cut off by the token limit (Anthropic `max_tokens`,
    Chat `length`, Responses `incomplete`). `usage` is (input_tokens, output_tokens); by default both
    are derived from the sizes of the request and the answer.
    """

    text: str | None = None
    tool_calls: Sequence[ToolCallSpec] = ()
    delay: float = 0.0
    usage: tuple[int, int] | None = None
    truncated: bool = False

    def __post_init__(self) -> None:
        calls = tuple(self.tool_calls)
        for call in calls:
            if not isinstance(call, ToolCallSpec):
                raise TypeError(f"Turn.tool_calls must hold ToolCallSpec, got {type(call).__name__}")
        ids = [c.id for c in calls]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"Turn has duplicate tool call ids: {duplicates}")
        if self.delay < 0:
            raise ValueError(f"Turn.delay must be >= 0, got {self.delay}")
        object.__setattr__(self, "tool_calls", calls)


_DEFAULT_MESSAGE = "scripted error"


@dataclass(frozen=True)
class ErrorTurn:
    """An API error in the flavour's own error shape.

    `error_type` / `code` override the defaults derived from `status`. `retry_after` sets the
    `retry-after` header; `should_retry` sets `x-should-retry`, which both SDKs obey over their own
    status-based retry rule. `mid_stream=True` on a streaming request answers 200, starts the stream
    and then sends the error event the API uses for failures during generation.
    """

    status: int = 500
    message: str = _DEFAULT_MESSAGE
    error_type: str | None = None
    code: str | None = None
    retry_after: float | None = None
    should_retry: bool | None = None
    mid_stream: bool = False
    delay: float = 0.0

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ValueError(f"ErrorTurn.status must be an HTTP error status (400-599), got {self.status}")
        if self.delay < 0:
            raise ValueError(f"ErrorTurn.delay must be >= 0, got {self.delay}")


Answer = Turn | ErrorTurn
DynamicTurn = Callable[["RecordedRequest"], Answer]
ScriptItem = Turn | ErrorTurn | DynamicTurn
