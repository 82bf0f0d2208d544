"""The interface each API flavour implements, so the server stays ignorant of wire details."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from .common import ImageView, ToolCallView, ToolResultView
from .script import ErrorTurn, Turn

# Both vendors accept the same tool-name alphabet; checking it here catches a provider that sends a
# name the real API would reject with a 400.
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class WireFormat(ABC):
    api: str
    path: str
    request_id_header: str

    @abstractmethod
    def validate(self, body: dict[str, Any]) -> str | None:
        """The message of the 400 the real API would answer, or None when the request is acceptable."""

    @abstractmethod
    def respond(self, turn: Turn, body: dict[str, Any]) -> dict[str, Any]: ...

    @abstractmethod
    def stream(self, turn: Turn, body: dict[str, Any]) -> Iterator[bytes]:
        """SSE events, one bytes object per event."""

    @abstractmethod
    def error_body(self, err: ErrorTurn) -> dict[str, Any]: ...

    @abstractmethod
    def stream_error(self, err: ErrorTurn, body: dict[str, Any]) -> Iterator[bytes]:
        """The opening events of a stream, then the API's in-stream error event."""

    @abstractmethod
    def messages(self, body: dict[str, Any]) -> list[dict[str, Any]]: ...

    @abstractmethod
    def system(self, body: dict[str, Any]) -> str: ...

    @abstractmethod
    def tool_names(self, body: dict[str, Any]) -> list[str]: ...

    @abstractmethod
    def tool_calls(self, body: dict[str, Any]) -> list[ToolCallView]: ...

    @abstractmethod
    def tool_results(self, body: dict[str, Any]) -> list[ToolResultView]: ...

    @abstractmethod
    def images(self, body: dict[str, Any]) -> list[ImageView]: ...


def check_tool_names(names: list[Any], where: str) -> str | None:
    for i, name in enumerate(names):
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            return f"{where}.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$' (got {name!r})"
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        return f"{where}: Tool names must be unique (duplicated: {', '.join(duplicates)})"
    return None
