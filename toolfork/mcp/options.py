"""What an ``MCPConnector`` tells the SDK's ``Client`` beyond where the server is: the protocol mode,
the callbacks a server may call back into (elicitation, sampling, roots, log messages), and the
bounds of the tool listing.

The callbacks run on the connector's loop thread (``host.py``), in the host process, while the tool
call that caused them waits in its worker: a server that asks mid-call is answered by the host, and
the call's deadline still bounds the whole exchange (at the deadline the worker is killed and the
request cancelled, the callback's answer with it). The SDK's callback signatures are kept (they are
documented there and carry the request context); a plain function is accepted too and runs in a
thread of its own, so a callback that blocks (a prompt to a person, a model call) never stalls the
other calls sharing the session.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROTOCOL_MODES = ("auto", "legacy")  # besides a modern protocol version string, e.g. "2026-07-28"
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(frozen=True)
class ListLimits:
    """Bounds of one ``tools/list`` walk: a server whose pages never end is stopped, not followed."""

    max_pages: int = 100
    timeout_s: float = 60.0  # from the open session to the last page

    def __post_init__(self) -> None:
        if not isinstance(self.max_pages, int) or isinstance(self.max_pages, bool) or self.max_pages < 1:
            raise ValueError(f"max_list_pages must be a positive integer, got {self.max_pages!r}")
        if not isinstance(self.timeout_s, (int, float)) or isinstance(self.timeout_s, bool) or self.timeout_s <= 0:
            raise ValueError(f"list_timeout must be a positive number of seconds, got {self.timeout_s!r}")


@dataclass(frozen=True)
class ClientOptions:
    """The ``mcp.Client`` settings of one connector (callbacks already made awaitable)."""

    mode: str = "auto"
    elicitation: Callable[..., Any] | None = None
    sampling: Callable[..., Any] | None = None
    roots: Callable[..., Any] | None = None
    logging: Callable[..., Any] | None = None
    log_level: str | None = None

    @classmethod
    def build(cls, mode: str, elicitation: Callable[..., Any] | None, sampling: Callable[..., Any] | None,
              roots: Callable[..., Any] | None, logging: Callable[..., Any] | None,
              log_level: str | None) -> ClientOptions:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if mode not in PROTOCOL_MODES and mode not in MODERN_PROTOCOL_VERSIONS:
            raise ValueError(f"protocol must be one of {[*PROTOCOL_MODES, *MODERN_PROTOCOL_VERSIONS]}, got {mode!r} "
                             "('legacy' is the initialize handshake of the protocol revisions up to 2025-11-25)")
        if log_level is not None and log_level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {list(LOG_LEVELS)}, got {log_level!r}")
        named = {"elicitation": elicitation, "sampling": sampling, "roots": roots, "logging": logging}
        for name, fn in named.items():
            if fn is not None and not callable(fn):
                raise TypeError(f"MCPConnector({name}=...) must be callable, got {fn!r}")
        return cls(mode, awaitable(elicitation), awaitable(sampling), awaitable(roots), awaitable(logging), log_level)

    def client_kwargs(self) -> dict[str, Any]:
        return {"mode": self.mode, "elicitation_callback": self.elicitation, "sampling_callback": self.sampling,
                "list_roots_callback": self.roots, "logging_callback": self.logging, "log_level": self.log_level}


def awaitable(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """``fn`` as a coroutine function: an async one as it is, a plain one run in a worker thread."""
    if fn is None or inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        return fn

    @functools.wraps(fn)
    async def in_thread(*args: Any) -> Any:
        result = await asyncio.to_thread(fn, *args)
        if inspect.isawaitable(result):
            result = await result
        return result

    return in_thread


__all__ = ["LOG_LEVELS", "PROTOCOL_MODES", "ClientOptions", "ListLimits", "awaitable"]
