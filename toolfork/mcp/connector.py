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
"""

from __future__ import annotations

import atexit
import re
import weakref
from typing import ClassVar
from urllib.parse import urlsplit

from toolfork._extras import import_optional
from toolfork.mcp.host import OPEN_TIMEOUT, Host, ServerTarget
from toolfork.mcp.mapping import tool_meta
from toolfork.mcp.relay import RemoteTool
from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.schema import NAME_PATTERN
from toolfork.tools.tool import Tool
from toolfork.tools.toolkit import Toolkit

_LIVE: weakref.WeakSet[MCPConnector] = weakref.WeakSet()


class MCPConnector(Toolkit):
    """The tools of one MCP server: stdio (``command=``, ``args=``, ``env=``, ``cwd=``) or streamable
    HTTP (``url=``, ``headers=``). ``prefix`` goes before every tool name; ``timeout`` (seconds) is
    each tool's default timeout. ``close()`` stops the server; ``tools()`` after it reopens."""

    name: ClassVar[str] = "MCP"

    def __init__(self, command: str | None = None, args: list[str] | tuple[str, ...] = (), *,
                 env: dict[str, str] | None = None, cwd: str | None = None, url: str | None = None,
                 headers: dict[str, str] | None = None, prefix: str = "", timeout: float | None = None,
                 label: str | None = None) -> None:
        super().__init__()
        import_optional("mcp", "MCPConnector")  # now, not in the loop thread at the first call
        if prefix and not re.fullmatch(r"[a-zA-Z0-9_-]*", prefix):
            raise ValueError(f"prefix must use only letters, digits, '_' and '-', got {prefix!r}")
        self._target = ServerTarget(command, list(args), env, cwd, url, headers)
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
        listed = host.run(host.list_tools(), OPEN_TIMEOUT + 30)
        tools = []
        where = self._target.describe()
        for t in listed:
            name = self._prefix + _tool_name(t.name)
            if not NAME_PATTERN.match(name):
                raise ToolDefinitionError(f"the {where} offers a tool named {t.name!r}, which cannot be made a "
                                          f"valid tool name ({name!r})")
            tool = Tool.from_json_schema(name, t.description or "", t.input_schema,
                                         fn=RemoteTool(host.address, t.name, where), timeout=self._timeout)
            for key, value in tool_meta(t).items():
                setattr(tool, key, value)
            tools.append(tool)
        return tools

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


__all__ = ["MCPConnector"]
