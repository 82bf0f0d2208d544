"""The provider interface: one model call in, one neutral ``AssistantMessage`` out.

A provider only translates (neutral messages and tools -> wire request, wire response -> neutral
message); the loop, the gate and the executor never see a wire format.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolfork.agent.errors import MissingAPIKeyError
from toolfork.agent.messages import AssistantMessage, Message
from toolfork.agent.special_tools import ProviderTool

StreamItem = str | AssistantMessage


@dataclass
class ModelRequest:
    """What the loop asks of a provider for one turn. ``tools`` have ``to_anthropic()`` /
    ``to_openai()`` (toolfork Tools, FrontendTools, the ToolSearch spec)."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[Any] = ()
    provider_tools: Sequence[ProviderTool] = field(default_factory=list)


class Provider:
    """Base class. Subclasses implement ``complete``; streaming and async default to it."""

    name = "provider"

    def __init__(self, model: str) -> None:
        if not model:
            raise ValueError(f"{type(self).__name__} needs a model name")
        self.model = model

    def check_request(self, request: ModelRequest) -> None:
        """Raise ``UnsupportedProviderToolError`` for provider tools this API cannot host."""

    def complete(self, request: ModelRequest) -> AssistantMessage:
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> Iterator[StreamItem]:
        """Text deltas (str) as they arrive, then the whole ``AssistantMessage`` last."""
        message = self.complete(request)
        if message.text:
            yield message.text
        yield message

    async def acomplete(self, request: ModelRequest) -> AssistantMessage:
        import asyncio

        return await asyncio.to_thread(self.complete, request)

    async def astream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        message = await self.acomplete(request)
        if message.text:
            yield message.text
        yield message

    def close(self) -> None:
        """Release HTTP clients."""

    async def aclose(self) -> None:
        """Release HTTP clients, the async one included (it must be closed from its event loop)."""
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


def key_from_env(provider: str, api_key: str | None, env_vars: tuple[str, ...]) -> str:
    """The explicit key, else the first set environment variable, else a clear error."""
    if api_key:
        return api_key
    for var in env_vars:
        value = os.environ.get(var)
        if value:
            return value
    raise MissingAPIKeyError(provider, env_vars)


__all__ = ["ModelRequest", "Provider", "StreamItem", "key_from_env"]
