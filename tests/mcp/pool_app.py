"""An SDK ``MCPServer`` app that ``toolfork mcp serve --app tests/mcp/pool_app.py:app`` serves in the
tests: tools that show where they ran (pid), crash, hang, and use the SDK's Context (log, progress,
elicitation, sampling, a protocol error); a resource and a prompt the SDK serves itself."""

from __future__ import annotations

import ctypes
import os
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import SamplingMessage, TextContent
from pydantic import BaseModel, Field

app = MCPServer(name="pool-app-test")


@app.tool()
def where() -> dict[str, int]:
    """The pid of the process the tool ran in."""
    return {"pid": os.getpid()}


@app.tool()
def crash() -> str:
    """Segfault."""
    ctypes.string_at(0)
    return "unreachable"


@app.tool()
def hang(marker: str) -> str:
    """Write the pid to ``marker``, then sleep far past any timeout."""
    with open(marker + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(marker + ".tmp", marker)
    time.sleep(600)
    return "woke"


@app.tool()
async def chatty(ctx: Context) -> str:
    """Log twice and report three progress steps, then answer."""
    await ctx.info("first")
    for i in range(3):
        await ctx.report_progress(i + 1, 3, f"step {i + 1}")
    await ctx.warning("second")
    return f"done in {os.getpid()}"


class Answer(BaseModel):
    word: str = Field(description="one word")


@app.tool()
async def ask(ctx: Context) -> str:
    """Ask the user for a word (elicitation), then the client's model (sampling)."""
    answer = await ctx.elicit(message="a word, please", schema=Answer)
    word = answer.data.word if answer.action == "accept" else "-"
    reply = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=f"say {word}"))], max_tokens=10,
        related_request_id=ctx.request_id)
    said = reply.content.text if reply.content.type == "text" else "?"
    return f"{answer.action}:{word}:{said}"


@app.tool()
def refuse() -> str:
    """A protocol-level error, as the spec asks for a missing client capability."""
    raise MCPError(code=-32003, message="needs sampling", data={"requiredCapabilities": {"sampling": {}}})


@app.resource("test://hello")
def hello() -> str:
    """A resource the SDK serves."""
    return f"hello from {os.getpid()}"


@app.prompt()
def greet(name: str) -> str:
    """A prompt the SDK serves."""
    return f"Hello, {name}"
