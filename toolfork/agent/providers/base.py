"""The provider interface: one model call in, one neutral ``AssistantMessage`` out.

A provider only translates (neutral messages and tools -> wire request, wire response -> neutral
message); the loop, the gate and the executor never see a wire format.
"""

from __future__ import annotations

import asyncio
import os
import threading
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
    neither imports the SDK nor opens a connection; ``close()`` / ``aclose()`` release them.

    An async client's connections belong to the event loop they were opened in: reused from another
    loop (a second ``asyncio.run``, a test's fresh loop) a request fails with "Event loop is closed"
    or a connection error. So each event loop gets an async client of its own (``async_client``), and
    it is built on an HTTP client of the SDK's defaults without the SDK's finalizer, which would close
    a client of an ended loop from whatever loop runs when it is collected (and fail there)."""

    api_key: str
    base_url: str | None
    timeout: float | None
    max_retries: int
    _client: Any = None
    _aclient: Any = None  # the async client made outside any running event loop
    _aclients: Any = None  # id(event loop) -> (the loop, its client); a closed loop's entry goes at the next one's

    @abstractmethod
    def _make_client(self, asynchronous: bool, **kwargs: Any) -> Any:
        """The SDK's sync or async client built with ``kwargs`` (the async one on an HTTP client
        without the SDK's finalizer: see the class docstring)."""
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
        """The async client of the running event loop (made on its first use there)."""
        loop = _running_loop()
        with _CLIENTS_LOCK:
            if loop is None:
                if self._aclient is None:
                    self._aclient = self._make_client(True, **self._client_kwargs())
                return self._aclient
            clients = self._aclients
            if clients is None:
                clients = self._aclients = {}
            mine = clients.get(id(loop))
            if mine is not None and mine[0] is loop:
                return mine[1]
            for key in [key for key, (other, _) in clients.items() if other.is_closed()]:
                del clients[key]  # an ended loop's client: its connections went with the loop
            client = self._make_client(True, **self._client_kwargs())
            clients[id(loop)] = (loop, client)
            return client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        with _CLIENTS_LOCK:
            self._aclient = None
            self._aclients = None

    async def aclose(self) -> None:
        """Close the sync client, and the async client of this event loop (and one made outside a
        loop); the clients of other loops are dropped (their connections are that loop's)."""
        loop = _running_loop()
        with _CLIENTS_LOCK:
            mine = [self._aclient]
            entry = self._aclients.get(id(loop)) if self._aclients is not None else None
            if entry is not None and entry[0] is loop:
                mine.append(entry[1])
            self._aclient = None
            self._aclients = None
        for aclient in mine:
            if aclient is not None:
                await aclient.close()
        self.close()


_CLIENTS_LOCK = threading.Lock()


def _running_loop() -> Any:
    """The event loop running in this thread, or None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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
