"""Serve an existing SDK server app (``MCPServer``, FastMCP) with its tools in the fork pool.

``toolfork mcp serve --app my_server.py:app`` (or ``pool_app(app)`` for code that runs its own
transport): the SDK keeps serving everything it serves (tools/list, resources, prompts, completions,
logging/setLevel, the handshake, its transports) and only the body of each ``tools/call`` moves: the
app's ``call_tool`` is replaced, on this instance, by one that sends the call to an ``Executor``. In a
worker the SDK's own ``MCPServer.call_tool`` runs it (argument validation, resolvers, result
conversion as the SDK does them), so a tool behaves as it does unpooled, with a timeout that kills its
worker and a crash that fails one call.

A tool that takes the SDK's ``Context`` gets a stand-in (``callback.RemoteContext``): what the context
knew when the call came in (request id, protocol version, client capabilities, input responses,
request state, the request's ``_meta``) is a plain value; every method (``info``/``log``,
``report_progress``, ``elicit``, ``session.create_message``, ``read_resource``, ``notify_*``,
``close_sse_stream``...) is carried to the real context in the server over the callback socket and
answered before the tool goes on. What a tool changes in its own process (``app.add_tool`` in a
worker) stays in that worker: the pool's workers are copies of the server.

The app is loaded (and so forked) before the pool starts; tools the app gains later in the server
process run there, unpooled, as the SDK runs them.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import os
import sys
import types as pytypes
from typing import TYPE_CHECKING, Any

from toolfork.mcp.callback import CallbackServer, RemoteContext, allow_module, new_call_id
from toolfork.tools.runtime import ToolRuntime

if TYPE_CHECKING:
    from toolfork.executor.executor import Executor
    from toolfork.tools.tool import Tool

APP_TOOL = "mcp_app_call"  # the one executor tool that runs any of the app's tools in a worker
# What a worker reads off the call's context when the call is dispatched (values, not methods).
SNAPSHOT = ("request_id", "protocol_version", "input_responses", "request_state", "client_capabilities",
            "headers", "session.client_capabilities", "session.client_params")
_APPS: dict[str, Any] = {}  # key -> app, filled before the pool forks (the workers inherit it)


def load_app(spec: str) -> Any:
    """``path/to/file.py:attr`` or ``package.module:attr`` -> the app (a function is called with no
    arguments and its result used: an app factory)."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise ValueError(f"--app takes FILE.py:ATTR or MODULE:ATTR (e.g. my_server.py:app), got {spec!r}")
    if where.endswith(".py") or os.sep in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise ValueError(f"--app {spec}: no file {path}")
        # A module name of its own, registered in sys.modules: the worker unpickles the app's own
        # classes (an elicitation schema, say) by that name.
        name = f"toolfork_app_{os.path.splitext(os.path.basename(path))[0]}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"--app {spec}: {path} cannot be imported")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        sys.path.insert(0, os.path.dirname(path))
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    allow_module(module.__name__)  # its classes (an elicitation schema) may be named in a tool's requests
    try:
        app = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"--app {spec}: {where} has no attribute {attr!r}") from None
    if not hasattr(app, "call_tool") and inspect.isroutine(app):
        app = app()
    if not (hasattr(app, "call_tool") and hasattr(app, "list_tools")):
        raise ValueError(f"--app {spec}: {attr!r} is not an MCP server app (an MCPServer / FastMCP instance, or a "
                         f"function returning one), it is {app!r:.80}")
    return app


class AppCall:
    """Worker side: runs one tool of the app, as the SDK's ``MCPServer.call_tool`` runs it."""

    def __init__(self, key: str, address: str) -> None:
        self.key, self.address = key, address

    def __call__(self, _toolfork_runtime_: ToolRuntime, name: str, arguments: dict[str, Any],
                 context: dict[str, Any]) -> dict[str, Any]:
        from mcp.shared.exceptions import MCPError

        app = _APPS[self.key]
        runtime = _toolfork_runtime_
        ctx = RemoteContext(self.address, runtime.call_id, context, {"mcp_server": app}, runtime.remaining)
        try:
            result = asyncio.run(type(app).call_tool(app, name, arguments, ctx))
        except MCPError as exc:  # a protocol error the tool meant: carried as such
            return {"mcp_error": {"code": exc.error.code, "message": exc.error.message, "data": exc.error.data}}
        return {"type": type(result).__name__, "result": result.model_dump(mode="json", by_alias=True,
                                                                           exclude_none=True)}


def _snapshot(context: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key in SNAPSHOT:
        obj = context
        try:
            for part in key.split("."):
                obj = getattr(obj, part)
        except Exception:  # a property that has nothing to say here (no request, no session)
            continue
        values[key] = obj
    try:
        request = context.request_context
        values["request_context"] = pytypes.SimpleNamespace(
            meta=request.meta, request_id=request.request_id, protocol_version=request.protocol_version,
            method=request.method, params=dict(request.params) if request.params else None)
    except Exception:
        pass
    return values


def app_tool(app: Any, callbacks: CallbackServer) -> Tool:
    """The executor tool that runs the app's tools (registered for the workers to find)."""
    from toolfork.mcp.relay import RUNTIME_PARAM
    from toolfork.tools.tool import Tool

    key = f"{os.getpid()}-{id(app)}"
    _APPS[key] = app
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"},
                                               "context": {"type": "object"}},
              "required": ["name", "arguments", "context"]}
    assert RUNTIME_PARAM == "_toolfork_runtime_"
    return Tool.from_json_schema(APP_TOOL, "Runs a tool of the served MCP app in a worker", schema,
                                 fn=AppCall(key, callbacks.address))


def install(app: Any, executor: Executor, callbacks: CallbackServer, pooled: set[str]) -> None:
    """Replace ``app.call_tool`` (on this instance) by one that runs the tools named in ``pooled`` in
    the executor; other tools (added later, in this process) run as the SDK runs them."""
    import mcp_types as types
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError

    from toolfork.executor.types import ToolCall
    from toolfork.mcp.server import until_client_leaves

    unpooled = app.call_tool

    async def call_tool(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name not in pooled or context is None:
            return await unpooled(name, arguments, context)
        await callbacks.start()
        call_id = new_call_id()
        call = ToolCall(call_id, APP_TOOL, {"name": name, "arguments": dict(arguments),
                                            "context": _snapshot(context)})
        with callbacks.registered(call_id, context):
            request = getattr(context, "request_context", None)
            result = await until_client_leaves(request, executor.acall(call))
        if result.status != "ok":
            what = {"timeout": "the call timed out", "crashed": "the tool's worker process crashed",
                    "cancelled": "the call was cancelled"}.get(result.status, "")
            detail = result.error.message if result.error is not None else ""
            raise ToolError(f"{what}: {detail}" if what else detail or f"Error executing tool {name}")
        data = result.output.data if result.output is not None else None
        if not isinstance(data, dict):
            raise ToolError(f"Error executing tool {name}: the worker sent no result")
        if "mcp_error" in data:
            error = data["mcp_error"]
            raise MCPError(code=error["code"], message=error["message"], data=error.get("data"))
        return getattr(types, data["type"]).model_validate(data["result"])

    app.call_tool = call_tool


async def pooled_tool_names(app: Any) -> set[str]:
    return {t.name for t in await app.list_tools()}


def pool_app(app: Any, executor_factory: Any = None, **executor_options: Any) -> tuple[Executor, CallbackServer]:
    """Put ``app``'s tools in a fork pool: returns the executor (close it when done) and the callback
    server (``await callbacks.stop()``; ``callbacks.remove()``). Call it before the app serves, from
    the thread that will not run an event loop yet (the tools are listed with ``asyncio.run``)."""
    from toolfork.executor import Executor

    callbacks = CallbackServer()
    try:
        names = asyncio.run(pooled_tool_names(app))
        tool = app_tool(app, callbacks)
        executor = (executor_factory or Executor)([tool], **executor_options)  # may refuse its limits
    except BaseException:
        callbacks.remove()  # its private directory: nothing will serve on it
        raise
    install(app, executor, callbacks, names)
    return executor, callbacks


__all__ = ["APP_TOOL", "AppCall", "app_tool", "install", "load_app", "pool_app"]
