"""What a tool gives back: content blocks (text and media) plus an error flag.

Both classes are slotted dataclasses, not pydantic models: one ToolOutput is built per call and
pickled across the worker's pipe, so construction and pickling must stay cheap.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from toolfork.tools.values import NotData, as_data, iterator_error

BlockType = Literal["text", "image", "file", "audio", "video"]
BLOCK_TYPES: tuple[str, ...] = ("text", "image", "file", "audio", "video")


@dataclass(slots=True)
class ContentBlock:
    """One piece of tool output. Media blocks carry either base64 ``data`` or a ``url``."""

    type: BlockType
    text: str | None = None
    data: str | None = None
    url: str | None = None
    media_type: str | None = None
    name: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # Positional reconstruction pickles in about half the time of the dataclass default, and every
        # result of the fork pool crosses a pipe pickled.
        return (ContentBlock, (self.type, self.text, self.data, self.url, self.media_type, self.name))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for key in ("text", "data", "url", "media_type", "name"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ContentBlock:
        if d.get("type") not in BLOCK_TYPES:
            raise ValueError(f"content block type must be one of {BLOCK_TYPES}, got {d.get('type')!r}")
        return cls(
            type=d["type"],
            text=d.get("text"),
            data=d.get("data"),
            url=d.get("url"),
            media_type=d.get("media_type"),
            name=d.get("name"),
        )

    def as_text(self) -> str:
        """Text, or a short placeholder for media so a text-only model still learns what came back."""
        if self.type == "text":
            return self.text or ""
        label = self.type if not self.name else f"{self.type} {self.name}"
        if self.url is not None:
            return f"[{label} {self.url}]"
        size = len(base64.b64decode(self.data, validate=False)) if self.data else 0
        return f"[{label} {self.media_type or 'application/octet-stream'}, {size} bytes]"


def _b64(data: bytes | str | None) -> str | None:
    if data is None or isinstance(data, str):
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(data)).decode("ascii")
    raise TypeError(f"media data must be bytes or a base64 str, got {type(data).__name__}")


def _media(
    kind: BlockType, data: bytes | str | None, url: str | None, media_type: str, name: str | None
) -> ToolOutput:
    if (data is None) == (url is None):
        raise ValueError(f"ToolOutput.{kind}() needs exactly one of data= or url=")
    block = ContentBlock(type=kind, data=_b64(data), url=url, media_type=media_type, name=name)
    return ToolOutput(content=[block])


def _is_known_scalar(value: Any) -> bool:
    """A value pydantic knows as data with a faithful text form: datetime, Decimal, UUID, Path, Enum..."""
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        to_jsonable_python(value)
    except PydanticSerializationError:
        return False
    return True


@dataclass(slots=True)
class ToolOutput:
    """The result of one tool call. ``data`` keeps the JSON value when the tool returned structured data,
    so JSON consumers (``toolfork run``, output models) need not re-parse the text."""

    content: list[ContentBlock] = field(default_factory=list)
    is_error: bool = False
    data: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (ToolOutput, (self.content, self.is_error, self.data))

    # -- constructors -----------------------------------------------------------------------------
    @classmethod
    def text(cls, text: str) -> ToolOutput:
        return cls(content=[ContentBlock(type="text", text=text)])

    @classmethod
    def error(cls, message: str) -> ToolOutput:
        """An error result the model sees as such (``is_error``), without raising."""
        return cls(content=[ContentBlock(type="text", text=message)], is_error=True)

    @classmethod
    def image(
        cls, data: bytes | str | None = None, url: str | None = None, media_type: str = "image/png"
    ) -> ToolOutput:
        return _media("image", data, url, media_type, None)

    @classmethod
    def file(
        cls,
        data: bytes | str | None = None,
        url: str | None = None,
        media_type: str = "application/octet-stream",
        name: str | None = None,
    ) -> ToolOutput:
        return _media("file", data, url, media_type, name)

    @classmethod
    def audio(
        cls, data: bytes | str | None = None, url: str | None = None, media_type: str = "audio/wav"
    ) -> ToolOutput:
        return _media("audio", data, url, media_type, None)

    @classmethod
    def video(
        cls, data: bytes | str | None = None, url: str | None = None, media_type: str = "video/mp4"
    ) -> ToolOutput:
        return _media("video", data, url, media_type, None)

    @classmethod
    def from_value(cls, value: Any) -> ToolOutput:
        """Normalise whatever a tool returned. Order matters: bool is an int, str is checked first. Values
        that are not JSON become data by one rule (``toolfork.tools.values``: numpy by ``.tolist()``,
        other numbers as a float where exact, else their text, other objects by ``str()``); a value that
        is not data (a lock, a client, an iterator) raises ``TypeError`` naming its type."""
        kind = type(value)  # the exact types most tools return, first: this runs once per call on the hot path
        if kind is str:
            return cls([ContentBlock("text", value)])
        if kind is int or kind is float:
            return cls([ContentBlock("text", str(value))], False, value)
        try:
            return cls._normalised(value)
        except NotData as exc:  # a TypeError, reported as one: the error type a call's result names
            raise TypeError(str(exc)) from None

    @classmethod
    def _normalised(cls, value: Any) -> ToolOutput:
        if isinstance(value, ToolOutput):
            return value
        if isinstance(value, str):  # a subclass (StrEnum, a framework's text type): its text, as a str
            return cls(content=[ContentBlock(type="text", text=str.__str__(value))])
        if value is None:
            return cls(content=[ContentBlock(type="text", text="")])
        if isinstance(value, (bool, int, float)):  # a subclass: numpy.float64, IntEnum, ...
            plain = as_data(value)
            return cls(content=[ContentBlock(type="text", text=json.dumps(plain))], data=plain)
        if isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(
                "a tool returned raw bytes; wrap them in ToolOutput.file(...), .image(...), .audio(...) "
                "or .video(...) with a media type, or decode them to str"
            )
        if isinstance(value, ContentBlock):
            return cls(content=[value])
        failure = iterator_error(value)
        if failure is not None:
            raise failure
        structured = isinstance(value, (dict, list, tuple)) or _is_model(value) or dataclasses.is_dataclass(value)
        if not structured and _is_known_scalar(value):
            return cls(content=[ContentBlock(type="text", text=str(value))])
        data = as_data(value)  # the one rule (toolfork.tools.values): numpy, mpmath, Ellipsis, ...
        if type(data) is str:
            return cls(content=[ContentBlock(type="text", text=data)])
        return cls([ContentBlock("text", json.dumps(data, ensure_ascii=False))], False, data)

    # -- views --------------------------------------------------------------------------------------
    def as_text(self) -> str:
        """The text-only fallback: text blocks joined, media as placeholders."""
        return "\n".join(block.as_text() for block in self.content)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": [b.to_dict() for b in self.content], "is_error": self.is_error}
        if self.data is not None:
            out["data"] = self.data
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolOutput:
        return cls(
            content=[ContentBlock.from_dict(b) for b in d.get("content", [])],
            is_error=bool(d.get("is_error", False)),
            data=d.get("data"),
        )

    def __add__(self, other: ToolOutput) -> ToolOutput:
        """Concatenate outputs (text + image ...); an error anywhere makes the whole an error."""
        if not isinstance(other, ToolOutput):
            return NotImplemented
        return ToolOutput(
            content=[*self.content, *other.content],
            is_error=self.is_error or other.is_error,
            data=self.data if self.data is not None else other.data,
        )


def _is_model(value: Any) -> bool:
    return hasattr(type(value), "__pydantic_validator__") and hasattr(value, "model_dump")


__all__ = ["BLOCK_TYPES", "ContentBlock", "ToolOutput"]
