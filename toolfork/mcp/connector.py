"""``MCPConnector``: the tools of one MCP server as a toolfork ``Toolkit``.

    fs = MCPConnector(command="npx", args=["-y", "@modelcontextprotocol/server-filesystem", "/data"])
    web = MCPConnector(url="https://example.com/mcp", headers={"Authorization": "Bearer ..."}, prefix="web_")
    agent = Agent(provider, tools=[fs, web])

Each MCP tool becomes a ``Tool.from_json_schema`` tool (arguments validated against the server's
input schema) whose function relays the call to the connector's open session (see ``host.py`` for
where the session lives and why). The tool keeps the server's ``title``, ``annotations`` (camelCase
hints as on the wire: ``readOnlyHint``, ``destructiveHint``, ...) and ``output_schema`` as attributes.

Two servers offering one tool name clash like any two tools (``DuplicateToolError`` names both, with
the connector each came from); ``prefix="fs_"`` avoids that.

A server that asks things back gets its answers from the connector's callbacks: ``elicitation=``
(form or URL elicitation, and the input-required results of the 2026-07-28 revision, which the SDK's
client answers and retries), ``sampling=`` (the client's model), ``roots=`` and ``logging=`` (with
``log_level=`` as the opt-in on 2026-07-28 sessions); see ``options.py`` for where they run.
``auth=`` is HTTP authorization, usually an OAuth provider from ``toolfork.mcp.auth``.

One bad tool does not cost the others: a tool whose input schema is not a valid JSON Schema (as
``"type": "integr"``) or whose name cannot be a tool name is left out with a ``SkippedToolWarning``
naming it and why (``skipped`` keeps the list). The listing is bounded: at most ``max_list_pages``
pages in ``list_timeout`` seconds, after which ``tools()`` raises and the listing has stopped.
"""

from __future__ import annotations

import atexit
import re
import warnings
import weakref
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import urlsplit

from toolfork._extras import import_optional
from toolfork.mcp.host import OPEN_TIMEOUT, Host, ServerTarget
from toolfork.mcp.mapping import tool_meta
from toolfork.mcp.options import ClientOptions, ListLimits
from toolfork.mcp.relay import RemoteTool
from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.schema import NAME_PATTERN
from toolfork.tools.tool import Tool
from toolfork.tools.toolkit import Toolkit

_LIVE: weakref.WeakSet[MCPConnector] = weakref.WeakSet()


class SkippedToolWarning(UserWarning):
    """A tool of an MCP server was left out (its schema or name is unusable); the message says which and why."""


class MCPConnector(Toolkit):
    """The tools of one MCP server: stdio (``command=``, ``args=``, ``env=``, ``cwd=``) or streamable
    HTTP (``url=``, ``headers=``, ``auth=``). ``prefix`` goes before every tool name; ``timeout``
    (seconds) is each tool's default timeout. ``protocol`` is the SDK client's mode: "auto" (probe
    for the 2026-07-28 revision, fall back to the handshake), "legacy" (the initialize handshake) or
    a modern revision to adopt outright. ``close()`` stops the server; ``tools()`` after it reopens."""

    name: ClassVar[str] = "MCP"

    def __init__(self, command: str | None = None, args: list[str] | tuple[str, ...] = (), *,
                 env: dict[str, str] | None = None, cwd: str | None = None, url: str | None = None,
                 headers: dict[str, str] | None = None, prefix: str = "", timeout: float | None = None,
                 label: str | None = None, auth: Any = None, protocol: str = "auto",
                 elicitation: Callable[..., Any] | None = None, sampling: Callable[..., Any] | None = None,
                 roots: Callable[..., Any] | None = None, logging: Callable[..., Any] | None = None,
                 log_level: str | None = None, max_list_pages: int = ListLimits.max_pages,
                 list_timeout: float = ListLimits.timeout_s) -> None:
        super().__init__()
        import_optional("mcp", "MCPConnector")  # now, not in the loop thread at the first call
        if prefix and not re.fullmatch(r"[a-zA-Z0-9_-]*", prefix):
            raise ValueError(f"prefix must use only letters, digits, '_' and '-', got {prefix!r}")
        options = ClientOptions.build(protocol, elicitation, sampling, roots, logging, log_level)
        self._limits = ListLimits(max_list_pages, list_timeout)
        self._target = ServerTarget(command, list(args), env, cwd, url, headers, auth, options)
        self.skipped: dict[str, str] = {}  # server's tool name -> why it was left out (last listing)
        self._host = Host(self._target)
        self._prefix = prefix
        self._timeout = timeout
        self._label = label or (urlsplit(url).netloc if url else (command or "").rsplit("/", 1)[-1])
        _LIVE.add(self)

    @property
    def toolkit_name(self) -> str:
        return f"MCPConnector({self._label})"

    @property
    def sessions_opened(self) -> int:
        """How many sessions were opened so far: 1 normally, one more per restart after a server died."""
        return self._host.opened

    def provide(self) -> list[Tool]:
        host = self._host
        # The listing stops itself at list_timeout; the wait here is only the backstop behind it.
        listed = host.run(host.list_tools(self._limits), OPEN_TIMEOUT + self._limits.timeout_s + 15)
        tools = []
        skipped: dict[str, str] = {}
        where = self._target.describe()
        for t in listed:
            try:
                tools.append(self._tool(t, where))
            except ToolDefinitionError as exc:
                skipped[t.name] = str(exc)
                warnings.warn(f"MCPConnector: left out the tool {t.name!r} of the {where}: {exc}",
                              SkippedToolWarning, stacklevel=2)
        self.skipped = skipped
        return tools

    def _tool(self, t: Any, where: str) -> Tool:
        name = self._prefix + _tool_name(t.name)
        if not NAME_PATTERN.match(name):
            raise ToolDefinitionError(f"its name cannot be made a valid tool name ({name!r})")
        tool = Tool.from_json_schema(name, t.description or "", t.input_schema,
                                     fn=RemoteTool(self._host.address, t.name, where), timeout=self._timeout)
        for key, value in tool_meta(t).items():
            setattr(tool, key, value)
        tool.input_schema = t.input_schema  # type: ignore[attr-defined]  # verbatim, as the server listed it
        return tool

    def tools(self) -> list[Tool]:
        self._host.start()  # reopened after close(): the cached tools work again
        return super().tools()

    def close(self) -> None:
        """Stop the server process and the relay. Safe to call twice."""
        self._host.close()

    def __enter__(self) -> MCPConnector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MCPConnector {self._target.describe()}>"


def _tool_name(name: str) -> str:
    """MCP allows '.' and '/' in names, model APIs do not: they become '_' (the server's name is kept
    for the call)."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]


@atexit.register
def _close_all() -> None:
    """A connector the program forgot to close still leaves no server process behind at exit."""
    for connector in list(_LIVE):
        try:
            connector.close()
        except Exception:
            pass


__all__ = ["MCPConnector", "SkippedToolWarning"]
