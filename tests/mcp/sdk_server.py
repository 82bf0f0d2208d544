"""An MCP server written with the official SDK (``MCPServer``), for the connector's tests.

``python -m tests.mcp.sdk_server`` serves stdio; ``--http PORT`` serves streamable HTTP on 127.0.0.1.
Each tool exercises one thing the connector must map or survive.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, MCPServer, Resolve, Sample
from pydantic import BaseModel

server = MCPServer("toolfork-test-server")


class Sum(BaseModel):
    total: int


@server.tool(title="Echo text", annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def echo(text: str) -> str:
    """Give the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers (structured output)."""
    return Sum(total=a + b)


@server.tool(annotations=types.ToolAnnotations(destructive_hint=False))
async def nap(seconds: float, ctx: Context) -> str:
    """Sleep, reporting progress twice."""
    await ctx.report_progress(0, 2, "starting")
    try:
        await asyncio.sleep(seconds / 2)
        await ctx.report_progress(1, 2, "halfway")
        await asyncio.sleep(seconds / 2)
    except asyncio.CancelledError:  # notifications/cancelled arrived: the test reads the log
        log = os.environ.get("TOOLFORK_TEST_CANCEL_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"cancelled nap {seconds}\n")
        raise
    return f"slept {seconds}"


@server.tool()
def fail(message: str) -> str:
    """Raise: the server answers with an isError result."""
    raise ValueError(message)


@server.tool()
def die() -> str:
    """End the server process in the middle of the call."""
    os._exit(3)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header (streamable HTTP only; empty otherwise)."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return headers.get(name, "") if headers is not None else ""


@server.tool()
def media() -> types.CallToolResult:
    """Every content type MCP has, and structured content."""
    return types.CallToolResult(content=[
        types.TextContent(type="text", text="hello"),
        types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav"),
        types.ResourceLink(type="resource_link", uri="file:///tmp/report.txt", name="report", mime_type="text/plain"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri="mem://note", text="embedded note", mime_type="text/plain")),
        types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
            uri="mem://blob", blob="AAEC", mime_type="application/octet-stream")),
    ], structured_content={"k": 1})


class Answer(BaseModel):
    name: str


def ask_name(question: str) -> Elicit[Answer]:
    return Elicit(question, Answer)


def ask_model(prompt: str) -> Sample:
    return Sample([types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
                  max_tokens=20)


# Resolvers, not ctx.elicit: the SDK asks mid-call on a handshake session and by an input-required
# result (SEP-2322) on a 2026-07-28 one, so one tool exercises both.
@server.tool()
async def ask(question: str, answer: Annotated[ElicitationResult[Answer], Resolve(ask_name)]) -> str:
    """Ask the client for a name (elicitation) and say what it answered."""
    return f"accept:{answer.data.name}" if isinstance(answer, AcceptedElicitation) else answer.action


@server.tool()
async def think(prompt: str, sampled: Annotated[types.CreateMessageResult, Resolve(ask_model)]) -> str:
    """Ask the client's model (sampling) and give its text back."""
    return f"{sampled.model}:{getattr(sampled.content, 'text', '')}"


@server.tool()
async def note(text: str, ctx: Context) -> str:
    """Send the client a log message (notifications/message), then answer."""
    await ctx.info(f"note: {text}")
    return "noted"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
