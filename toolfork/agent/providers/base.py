"""The provider interface: one model call in, one neutral ``AssistantMessage`` out.

A provider only translates (neutral messages and tools -> wire request, wire response -> neutral
message); the loop, the gate and the executor never see a wire format.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
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
    # Per-request overrides of the provider's settings (a tool's set_next_turn_params sets them).
    model: str | None = None
    temperature: float | None = None
    # "auto", "required" (some tool), "none" (no tool), or a tool name (that tool).
    tool_choice: str | None = None


class Provider(ABC):
    """Base class. Subclasses implement ``complete``; streaming and async default to it."""

    name = "provider"

    def __init__(self, model: str) -> None:
        if not model:
            raise ValueError(f"{type(self).__name__} needs a model name")
        self.model = model

    def check_request(self, request: ModelRequest) -> None:  # noqa: B027 - most APIs host every tool
        """Raise ``UnsupportedProviderToolError`` for provider tools this API cannot host."""

    @abstractmethod
    def complete(self, request: ModelRequest) -> AssistantMessage:
        ...

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

    def close(self) -> None:  # noqa: B027 - a provider without clients has nothing to release
        """Release HTTP clients."""

    async def aclose(self) -> None:
        """Release HTTP clients, the async one included (it must be closed from its event loop)."""
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


class SDKProvider(Provider):
    """A provider over a vendor SDK. The clients are made on first use, so building a provider
    neither imports the SDK nor opens a connection; ``close()`` / ``aclose()`` release them."""

    api_key: str
    base_url: str | None
    timeout: float | None
    max_retries: int
    _client: Any = None
    _aclient: Any = None

    @abstractmethod
    def _make_client(self, asynchronous: bool, **kwargs: Any) -> Any:
        """The SDK's sync or async client built with ``kwargs``."""
        ...

    def _client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"api_key": self.api_key, "max_retries": self.max_retries, "timeout": self.timeout}
        if self.base_url:
            kwargs["base_url"] = self.base_url
        return kwargs

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._make_client(False, **self._client_kwargs())
        return self._client

    @property
    def async_client(self) -> Any:
        if self._aclient is None:
            self._aclient = self._make_client(True, **self._client_kwargs())
        return self._aclient

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        self._aclient = None

    async def aclose(self) -> None:
        aclient, self._aclient = self._aclient, None
        if aclient is not None:
            await aclient.close()
        self.close()


def describe_api_error(exc: Exception) -> str:
    """An SDK error as one line: its class, the HTTP status when there is one, the server's message."""
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {getattr(exc, 'message', exc)}"


def key_from_env(provider: str, api_key: str | None, env_vars: tuple[str, ...]) -> str:
    """The explicit key, else the first set environment variable, else a clear error."""
    if api_key:
        return api_key
    for var in env_vars:
        value = os.environ.get(var)
        if value:
            return value
    raise MissingAPIKeyError(provider, env_vars)


__all__ = ["ModelRequest", "Provider", "SDKProvider", "StreamItem", "describe_api_error", "key_from_env"]
