"""MCP servers that misbehave in the ways third-party servers do, written with the SDK's low-level
``Server`` (so the wire is the real protocol), for the connector's robustness tests.

``python -m tests.mcp.hostile_server MODE [PAGE_LOG]`` serves stdio; ``--http PORT`` before MODE
serves streamable HTTP on 127.0.0.1. Each ``tools/list`` request appends one line to PAGE_LOG, so a
test can see whether a listing it was told had failed goes on.

  bad-schema     three tools, the middle one with ``"type": "integr"`` in its input schema
  endless        every page has a tool and a fresh next_cursor: the listing never ends
  slow-endless   as endless, each page taking 0.3 s (the deadline stops it before the page limit)
  same-cursor    every page sends the cursor it was given back
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

GOOD = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
BAD = {"type": "object", "properties": {"n": {"type": "integr"}}}


def build(mode: str, page_log: str | None) -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        if page_log:
            with open(page_log, "a") as f:
                f.write(f"{cursor}\n")
        if mode == "bad-schema":
            return types.ListToolsResult(tools=[
                types.Tool(name="first", description="Echo.", input_schema=GOOD),
                types.Tool(name="broken", description="Bad schema.", input_schema=BAD),
                types.Tool(name="last", description="Echo.", input_schema=GOOD),
            ])
        page = int(cursor or 0)
        if mode == "slow-endless":
            await asyncio.sleep(0.3)
        next_cursor = (cursor or "0") if mode == "same-cursor" else str(page + 1)
        return types.ListToolsResult(
            tools=[types.Tool(name=f"t{page}", description="One of many.", input_schema=GOOD)],
            next_cursor=next_cursor)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = (params.arguments or {}).get("text", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name}:{text}")])

    return Server("toolfork-hostile", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    args = sys.argv[1:]
    port = None
    if args and args[0] == "--http":
        port, args = int(args[1]), args[2:]
    server = build(args[0], args[1] if len(args) > 1 else None)
    if port is None:
        asyncio.run(serve_stdio(server))
    else:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
