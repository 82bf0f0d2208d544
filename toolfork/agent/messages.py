"""A small provider-neutral message model: what the history stores and the providers translate.

Each provider maps these to and from its wire format; keeping the neutral form lets one history
be replayed against Anthropic today and OpenAI tomorrow, and lets a paused run be written to JSON.
``raw`` on an assistant message keeps provider-specific blocks (thinking, server tool results)
so the same provider can send them back verbatim; another provider ignores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolfork.tools.output import ContentBlock, ToolOutput


@dataclass
class ToolCallRequest:
    """One tool call as the model made it. ``invalid_arguments`` holds the raw text when the model
    sent arguments that are not a JSON object (then ``arguments`` is empty and the gate answers
    with an error result instead of running the tool)."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    invalid_arguments: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.invalid_arguments is not None:
            data["invalid_arguments"] = self.invalid_arguments
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCallRequest:
        return cls(
            id=data["id"],
            name=data["name"],
            arguments=dict(data.get("arguments") or {}),
            invalid_arguments=data.get("invalid_arguments"),
        )


@dataclass
class UserMessage:
    """What the user said: plain text, or content blocks (text and images) for multimodal input."""

    content: str | list[ContentBlock]
    role: str = field(default="user", init=False)

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text or "" for b in self.content if b.type == "text")

    @property
    def blocks(self) -> list[ContentBlock]:
        if isinstance(self.content, str):
            return [ContentBlock(type="text", text=self.content)]
        return list(self.content)

    def to_dict(self) -> dict[str, Any]:
        if isinstance(self.content, str):
            return {"role": "user", "content": self.content}
        return {"role": "user", "content": ToolOutput(content=list(self.content)).to_dict()["content"]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UserMessage:
        content = data["content"]
        if isinstance(content, str):
            return cls(content)
        return cls(ToolOutput.from_dict({"content": content}).content)


@dataclass
class AssistantMessage:
    """A model turn: its text and the tool calls it asked for, in the order it asked."""

    text: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    stop_reason: str | None = None
    model: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    # {"provider": "anthropic", "content": [...]} — echoed back only to the same provider.
    raw: dict[str, Any] | None = None
    # Set by the agent when the turn arrives: identifies the turn even where a server reuses call ids.
    id: str | None = None
    role: str = field(default="assistant", init=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "role": "assistant",
            "text": self.text,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
        }
        for key in ("stop_reason", "model", "raw", "id"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.usage:
            data["usage"] = dict(self.usage)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AssistantMessage:
        return cls(
            text=data.get("text", ""),
            tool_calls=[ToolCallRequest.from_dict(c) for c in data.get("tool_calls", [])],
            stop_reason=data.get("stop_reason"),
            model=data.get("model"),
            usage=dict(data.get("usage") or {}),
            raw=data.get("raw"),
            id=data.get("id"),
        )

    def __str__(self) -> str:
        return self.text


@dataclass
class ToolResultItem:
    """The answer to one tool call as the model sees it. ``status`` is the executor's status, or
    one of the gate's: "unknown-tool", "invalid-arguments", "max-runs", "rejected", "not-executed"."""

    call_id: str
    name: str
    output: ToolOutput
    status: str = "ok"

    @property
    def is_error(self) -> bool:
        return bool(self.output.is_error)

    def to_dict(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.name, "status": self.status,
                "output": self.output.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResultItem:
        return cls(call_id=data["call_id"], name=data["name"], status=data.get("status", "ok"),
                   output=ToolOutput.from_dict(data["output"]))


@dataclass
class ToolResultMessage:
    """The results of one batch, in the order of the calls of the assistant turn before it."""

    results: list[ToolResultItem] = field(default_factory=list)
    role: str = field(default="tool", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"role": "tool", "results": [r.to_dict() for r in self.results]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResultMessage:
        return cls([ToolResultItem.from_dict(r) for r in data.get("results", [])])


Message = UserMessage | AssistantMessage | ToolResultMessage


def message_from_dict(data: dict[str, Any]) -> Message:
    """Rebuild a message from ``to_dict()`` output; the role picks the class."""
    role = data.get("role")
    if role == "user":
        return UserMessage.from_dict(data)
    if role == "assistant":
        return AssistantMessage.from_dict(data)
    if role == "tool":
        return ToolResultMessage.from_dict(data)
    raise ValueError(f"unknown message role {role!r} (expected 'user', 'assistant' or 'tool')")


def as_user_message(message: str | UserMessage) -> UserMessage:
    if isinstance(message, UserMessage):
        return message
    if isinstance(message, str):
        return UserMessage(message)
    raise TypeError(f"chat() takes a str or a UserMessage, not {type(message).__name__}")


__all__ = [
    "AssistantMessage",
    "Message",
    "ToolCallRequest",
    "ToolResultItem",
    "ToolResultMessage",
    "UserMessage",
    "as_user_message",
    "message_from_dict",
]
