"""The tools of the MCP benchmark (``mcp_rows.py``), served two ways: by ``toolfork mcp serve --tools
toolfork.bench.mcp_tools`` and, with ``python -m toolfork.bench.mcp_tools``, by the SDK's own
``MCPServer`` (stdio), which runs a sync tool in a thread of the server process."""

from __future__ import annotations

import time

from toolfork.tools import tool


def noop() -> str:
    """Return at once: the round trip alone."""
    return "ok"


def nap(seconds: float) -> str:
    """Sleep: an I/O-bound tool."""
    time.sleep(seconds)
    return "ok"


def burn(seconds: float) -> str:
    """Use ``seconds`` of CPU time: a CPU-bound tool. The calling thread's CPU time, not the process's:
    the SDK server runs concurrent calls in threads of one process, whose CPU time they would share."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    return "ok"


TOOLS = [tool(noop), tool(nap), tool(burn)]


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("sdk-bench")
    for fn in (noop, nap, burn):
        server.tool()(fn)
    server.run()


if __name__ == "__main__":
    main()
