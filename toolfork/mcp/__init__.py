"""MCP both ways (the ``[mcp]`` extra, on the official ``mcp`` SDK 2.x).

``MCPConnector``: the tools of any MCP server as a toolfork ``Toolkit`` (``connector.py``).
``toolfork mcp serve``: any toolfork tools served over MCP, every call in the fork pool (``server.py``).
"""

from __future__ import annotations

from toolfork.mcp.connector import MCPConnector, SkippedToolWarning
from toolfork.mcp.host import MCPConnectionError
from toolfork.mcp.mapping import MCPProtocolError
from toolfork.mcp.relay import MCPToolError

__all__ = ["MCPConnectionError", "MCPConnector", "MCPProtocolError", "MCPToolError", "SkippedToolWarning"]
