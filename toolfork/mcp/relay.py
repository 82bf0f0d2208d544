"""The worker side of an MCP tool: a picklable callable that asks the connector's loop (``host.py``)
to make the call, over the connector's relay socket.

It holds only the socket path and the server's name for the tool, so the executor can ship it to fork
workers like any tool function; it imports neither the SDK nor asyncio. Killing the worker (the
executor's timeout, a cancelled call) closes the socket, which the relay answers by cancelling the
MCP request.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from toolfork.mcp.mapping import output_from_dict
from toolfork.tools.output import ToolOutput
from toolfork.tools.runtime import ToolRuntime

# The keyword the executor passes the ToolRuntime as: unlikely to clash with an MCP tool's argument.
RUNTIME_PARAM = "_toolfork_runtime_"
# Seconds the SDK waits for a response past the call's deadline (see RemoteTool.__call__).
READ_TIMEOUT_SLACK_S = 2.0


class MCPToolError(Exception):
    """The MCP call could not be made: the server exited, could not be reached, or the connector is
    closed. (A tool that ran and failed is not this: it gives an ``is_error`` output.)"""


class RemoteTool:
    """Calls one tool of one MCP server through the connector's relay."""

    def __init__(self, address: str, server_tool: str, server: str) -> None:
        self.address = address
        self.server_tool = server_tool
        self.server = server  # for messages: which server this is

    def __call__(self, _toolfork_runtime_: ToolRuntime, **arguments: Any) -> ToolOutput:
        runtime = _toolfork_runtime_
        left = runtime.remaining()
        # The executor's deadline must win the race: it kills this worker and reports "timeout", and the
        # relay cancels the request on the server. The SDK's read timeout, set later, is only the
        # backstop where nothing kills the call (sequential mode off the main thread).
        timeout = None if left is None else left + READ_TIMEOUT_SLACK_S
        request = {"tool": self.server_tool, "arguments": arguments, "timeout": timeout}
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                sock.connect(self.address)
            except (FileNotFoundError, ConnectionRefusedError):
                raise MCPToolError(f"the MCPConnector for the {self.server} is closed; build the tools again "
                                   "(connector.tools()) to reopen it") from None
            sock.sendall(json.dumps(request).encode() + b"\n")
            with sock.makefile("rb") as lines:
                for line in lines:
                    message = json.loads(line)
                    if "progress" in message:
                        runtime.emit_progress(message["progress"])
                    elif "result" in message:
                        return output_from_dict(message["result"])
                    else:
                        error = message.get("error") or {}
                        raise MCPToolError(error.get("message") or "the MCP call failed")
            raise MCPToolError(f"the MCPConnector for the {self.server} was closed during the call")
        finally:
            sock.close()

    def __toolfork_close__(self) -> None:
        """Called by ``Executor.close()``: end the server session behind this tool (its process stops);
        the connector opens a new one if the tool is called again. A no-op outside the host process."""
        from toolfork.mcp.host import end_session

        end_session(self.address)

    def __repr__(self) -> str:
        return f"<MCP tool {self.server_tool!r} of the {self.server}>"


__all__ = ["RUNTIME_PARAM", "MCPToolError", "RemoteTool"]
