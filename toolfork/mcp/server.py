"""``toolfork mcp serve``: toolfork tools served over MCP, every ``tools/call`` in the fork pool.

A server built on the SDK's low-level ``Server`` (we need the raw JSON Schemas, our own results and
cancellation, not ``MCPServer``'s function introspection). One ``Executor`` runs every call, through
``Executor.acall``: concurrent requests (from one client or many) join one long-lived batch and share
the workers, so four CPU-bound calls on two cores take about the time of two.

What a client sees:
  * a tool that raises, times out (its worker is killed), segfaults or ``os._exit``s: an ``isError``
    result that says which (the server keeps serving: the call ran in a worker, not here);
  * arguments that do not match the schema: an ``isError`` result listing the bad fields (the MCP
    spec makes input validation a tool error so the model can correct itself);
  * an unknown tool: a protocol error (``INVALID_PARAMS``), the one misuse that is not a tool's; a
    tool that raises ``MCPProtocolError``: the JSON-RPC error it names;
  * ``notifications/cancelled``: the SDK cancels the request's task; awaiting ``acall`` cancelled
    cancels the executor's future, which kills the call's worker;
  * progress the tool reports (``ToolRuntime.emit_progress``): ``notifications/progress`` when the
    request carried a progress token (the SDK drops it otherwise), in order and before the result
    (``ProgressRelay``);
  * ``ToolRuntime.log`` / ``elicit`` / ``sample``: carried to the call's client over the callback
    socket (``callback.py``); on a 2026-07-28 request, where no request can go to the client mid-call,
    ``elicit`` and ``sample`` are input-required rounds of the parked call (``rounds.py``);
  * over HTTP, a client that drops its connection mid-call: the call is cancelled
    (``until_client_leaves``); SIGTERM does not wait for calls in flight.

An SDK app's tools in the pool (``--app``) are ``app.py``'s; this module serves either.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import numbers
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from toolfork.mcp.callback import CallbackServer, ClientOps, new_call_id
from toolfork.mcp.mapping import call_result, mcp_tool, protocol_error
from toolfork.mcp.rounds import PARK_S, ParkedCalls, PendingCall

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from toolfork.executor.executor import Executor
    from toolfork.executor.types import ToolCall, ToolResult

T = TypeVar("T")


def build_server(executor: Executor, name: str = "toolfork", callbacks: CallbackServer | None = None) -> Server[Any]:
    """An MCP server (SDK low-level ``Server``) whose tools are the executor's visible tools. With
    ``callbacks`` (made, and its ``client_link`` installed, before the executor forked its pool), a
    tool's ``ToolRuntime.log`` / ``elicit`` / ``sample`` reach the client of its call."""
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from toolfork import __version__
    from toolfork.executor.types import ToolCall

    tools = executor.tools
    listed = [mcp_tool(t) for t in tools.values() if t.is_visible]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        if params.name not in tools:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"Unknown tool: {params.name!r} (tools: {', '.join(sorted(tools)) or 'none'})")
        arguments = dict(params.arguments or {})
        if callbacks is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            outcome = await input_round(ctx, params, arguments)
            if isinstance(outcome, (types.InputRequiredResult, types.CallToolResult)):
                return outcome
            result = outcome
        else:
            result = await run_call(ctx, ToolCall(new_call_id(), params.name, arguments))
        error = protocol_error(result)
        if error is not None:
            raise MCPError(code=error[0], message=error[1], data=error[2])
        return call_result(result)

    def log_level(ctx: Any) -> str | None:
        return levels.get(_session_key(ctx))

    async def run_call(ctx: Any, call: ToolCall, ops: ClientOps | None = None,
                       relay: ProgressRelay | None = None) -> ToolResult:
        """The call, its client ops registered and its progress relayed; given ``ops`` (a 2026-07-28
        call), the rounds' requests are watched for their client leaving, not the first one."""
        watch = ops is None
        ops = ops or ClientOps(ctx, log_level)
        relay = relay or ProgressRelay(ctx)
        with callbacks.registered(call.id, ops) if callbacks is not None else contextlib.nullcontext():
            if callbacks is not None:
                await callbacks.start()
            async with relay:
                work = executor.acall(call, on_progress=relay.report)
                return await (until_client_leaves(ctx, work) if watch else work)

    parked = ParkedCalls()

    async def input_round(ctx: Any, params: types.CallToolRequestParams,
                          arguments: dict[str, Any]) -> ToolResult | types.InputRequiredResult | types.CallToolResult:
        """One request of a 2026-07-28 call (``rounds.py``): the first starts the call, a retry that
        names it by ``request_state`` answers its tool; either waits for its next question or its end."""
        if params.request_state is not None:
            try:
                pending = parked.take(params.request_state, params.name, arguments)
            except LookupError as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
            pending.resume(ctx, params.input_responses)
        else:
            ops = ClientOps(ctx, log_level, ask=lambda request: pending.ask(request))
            relay = ProgressRelay(ctx)

            def follow(round_ctx: Any) -> None:
                ops.ctx = relay.ctx = round_ctx

            call = ToolCall(new_call_id(), params.name, arguments)
            # The call outlives this request (it waits parked between rounds): a task of its own,
            # cancelled by ``parked.cancelling`` when a round's request is.
            task = asyncio.ensure_future(run_call(ctx, call, ops, relay))
            pending = PendingCall(task, params.name, arguments, follow)
        with parked.cancelling(pending):
            asked = await until_client_leaves(ctx, pending.next_round())
        if asked is not None:
            parked.park(pending)
            return types.InputRequiredResult(input_requests=asked, request_state=pending.state)
        if pending.task.cancelled():  # parked too long (``rounds.PARK_S``): a late retry learns so
            return types.CallToolResult(is_error=True, content=[types.TextContent(
                type="text", text=f"the call was cancelled: no retry came within {PARK_S:g} s of its question")])
        result: ToolResult = pending.task.result()
        return result

    levels: dict[str, str] = {}  # session -> the level its logging/setLevel asked for

    async def set_logging_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        levels[_session_key(ctx)] = params.level
        return types.EmptyResult()

    # A tools server has no resources or prompts: it says so with empty lists (as the SDK's MCPServer
    # does) rather than "method not found", which clients and the conformance suite take as broken.
    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[])

    server = Server(name, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool,
                    on_list_resources=list_resources, on_list_resource_templates=list_resource_templates,
                    on_list_prompts=list_prompts)
    # logging/setLevel is how a handshake-era client picks its log level. The SDK's constructor keyword for
    # it warns (the 2026-07-28 protocol dropped the capability) on every start, whatever the client speaks;
    # the plain handler table serves the older clients that still send it, without that warning.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_logging_level)
    return server


def _session_key(ctx: Any) -> str:
    """Which client session a request belongs to: the HTTP session id (each request has an SDK session
    object of its own there), else the one stdio session."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    return str(headers.get("mcp-session-id", "")) if headers is not None else "stdio"


# How often a call checks that its HTTP client is still connected (a dropped client frees its worker).
CLIENT_POLL_S = 0.5


async def until_client_leaves(ctx: Any, work: Coroutine[Any, Any, T]) -> T:
    """Await ``work``; if the HTTP request that asked for it is disconnected first (the client dropped
    its connection mid-call), cancel it, which kills the call's worker, and raise ``CancelledError``.

    Neither the SDK nor uvicorn cancels a request's handler when its client goes away, so without this
    a dropped client's call runs on to its end (with no timeout, for ever) holding a worker. The check
    is Starlette's ``Request.is_disconnected`` (stdio has no request: nothing to watch)."""
    request = getattr(ctx, "request", None)
    check = getattr(request, "is_disconnected", None)
    task = asyncio.ensure_future(work)
    if check is None:
        return await task
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=CLIENT_POLL_S)
            if done:
                return task.result()
            if await check():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                raise asyncio.CancelledError(f"the client of {ctx.request_id!r} disconnected")
    finally:
        if not task.done():
            task.cancel()


def progress_args(value: Any, step: Iterator[int]) -> tuple[float, float | None, str | None]:
    """A progress value as MCP's (progress, total, message). MCP progress must increase, so a value
    that is not a number (or a ``{"progress", "total", "message"}`` dict) is sent as the next step
    with the value as its message."""
    if isinstance(value, dict) and isinstance(value.get("progress"), numbers.Real):
        return float(value["progress"]), value.get("total"), value.get("message")
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value), None, None
    return float(next(step)), None, str(value)


class ProgressRelay:
    """A call's progress, from the executor's thread to the client, in order and before the result.

    ``report`` (called on the executor's thread) only queues the value on the event loop
    (``call_soon_threadsafe``), so the executor never waits for the client; one task sends the queue
    in order. The executor reports a call's progress before it sets the call's result, and the loop
    runs thread-safe callbacks in the order they came, so when ``acall`` returns every value is
    queued; leaving the ``async with`` waits until they are sent. (Sending each value from a task of
    its own, as before, let the result overtake the last ones: on a 2026-07-28 session progress rides
    the request's own response stream, which closes with the result, so they were lost.)"""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx  # the request progress goes to (a 2026-07-28 call's retry replaces it)
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self._step = itertools.count(1)
        self._done = object()

    def report(self, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: the request is over
            self._loop.call_soon_threadsafe(self._queue.put_nowait, value)

    async def __aenter__(self) -> ProgressRelay:
        self._sender = asyncio.ensure_future(self._send())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._sender is not None
        if exc[0] is not None:  # cancelled or failed: nothing more is owed to the client
            self._sender.cancel()
            with contextlib.suppress(BaseException):
                await self._sender
            return
        self._queue.put_nowait(self._done)
        await self._sender

    async def _send(self) -> None:
        while True:
            value = await self._queue.get()
            if value is self._done:
                return
            with contextlib.suppress(Exception):  # a client that cannot take it must not fail the call
                await self.ctx.session.report_progress(*progress_args(value, self._step))


class Wire:
    """The stdio wire, taken off fds 0 and 1 before the fork pool starts.

    Workers are forked from a template that is forked from this process when the ``Executor`` is
    built; a tool that prints (or reads stdin) in a worker would otherwise write into (or steal from)
    the JSON-RPC stream. So the wire moves to private descriptors first, fd 1 points at stderr and
    fd 0 at the null device, and only then is the executor built."""

    def __init__(self) -> None:
        self.read_fd = os.dup(0)
        self.write_fd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)

    def streams(self) -> tuple[Any, Any]:
        import io

        import anyio

        stdin = io.TextIOWrapper(os.fdopen(self.read_fd, "rb", closefd=False), encoding="utf-8", errors="replace")
        stdout = io.TextIOWrapper(os.fdopen(self.write_fd, "wb", closefd=False), encoding="utf-8")
        return anyio.wrap_file(stdin), anyio.wrap_file(stdout)


async def serve_stdio(executor: Executor, wire: Wire | None = None, callbacks: CallbackServer | None = None) -> None:
    """Serve on stdin/stdout (or the ``wire`` taken off them) until stdin closes."""
    from mcp.server.stdio import stdio_server

    server = build_server(executor, callbacks=callbacks)
    streams = wire.streams() if wire is not None else (None, None)
    async with stdio_server(*streams) as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_app_stdio(app: Any, wire: Wire | None = None) -> None:
    """An SDK app (``MCPServer``) on stdin/stdout, or on the ``wire`` taken off them: the SDK's stdio
    transport reads ``sys.stdin`` and ``sys.stdout`` when it starts, so they are the wire meanwhile."""
    if wire is None:
        await app.run_stdio_async()
        return
    import io

    saved = sys.stdin, sys.stdout
    sys.stdin = io.TextIOWrapper(os.fdopen(wire.read_fd, "rb", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(os.fdopen(wire.write_fd, "wb", closefd=False), encoding="utf-8")
    try:
        await app.run_stdio_async()
    finally:
        sys.stdin, sys.stdout = saved


async def serve_http(executor: Executor, host: str, port: int,
                     announce: Callable[[str], None] | None = None, app: Any = None,
                     callbacks: CallbackServer | None = None) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until SIGTERM / Ctrl-C (uvicorn's handlers):
    the executor's tools, or the SDK ``app`` (its tools already in the executor: ``app.pool_app``).
    ``announce`` gets the URL once listening (with port 0, the port the system chose)."""
    import uvicorn

    asgi = (app if app is not None else build_server(executor, callbacks=callbacks)).streamable_http_app(host=host)
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    # Our own handlers, not uvicorn's: uvicorn re-raises the signal after its shutdown, which would end
    # the process before the executor is closed (and the exit status would be the signal's).
    web.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    # Calls in flight do not hold the exit up: uvicorn would wait for their requests to end (a hanging
    # tool: for ever). force_exit skips that wait, the SDK's session manager then cancels the requests
    # (each cancelled call's worker is killed) and run() closes the executor; should even that stall,
    # the backstop closes the executor and exits.
    def stop() -> None:
        web.should_exit = web.force_exit = True
        backstop = threading.Timer(EXIT_BACKSTOP_S, close_and_exit, ([executor],))
        backstop.daemon = True
        backstop.start()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop)
    serving = asyncio.ensure_future(web.serve())
    while not web.started and not serving.done():
        await asyncio.sleep(0.02)
    if web.started and announce is not None:
        bound = web.servers[0].sockets[0].getsockname()
        announce(f"http://{host}:{bound[1]}/mcp")
    await serving
    # force_exit also skips the app's lifespan shutdown; the loop would then cancel the lifespan task, and
    # Starlette reports that cancellation as a failed shutdown (a CancelledError traceback on every
    # SIGTERM). Ending the lifespan here shuts the SDK's session manager down in order instead.
    lifespan = getattr(web, "lifespan", None)
    if web.force_exit and lifespan is not None:
        await lifespan.shutdown()


EXIT_BACKSTOP_S = 10.0  # seconds an HTTP server gets to shut down on SIGTERM before it is made to


def close_and_exit(executors: list[Executor]) -> None:
    """Close the executors (no worker left behind), then end the process with status 0."""
    from toolfork.executor.tracing.providers import flush

    for executor in executors:
        with contextlib.suppress(Exception):
            executor.close()
    flush()  # os._exit runs no atexit hook: the SDK's exporters get what they hold now
    os._exit(0)


def exit_on_signals(executors: list[Executor]) -> None:
    """SIGTERM and Ctrl-C: close the executors (no worker left behind), then exit with status 0.

    Not by raising ``KeyboardInterrupt`` into the event loop: the stdio transport reads stdin in a
    thread that cancellation cannot interrupt, so the loop would wait for a line that never comes. The
    closing runs in a thread of its own: the signal may arrive while the main thread holds a lock
    the closing needs. (With ``--http``, the loop's own handlers replace these while serving.)"""

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=close_and_exit, args=(executors,), name="toolfork-mcp-exit", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def run(executor: Executor, http: tuple[str, int] | None = None, wire: Wire | None = None, app: Any = None,
        callbacks: CallbackServer | None = None) -> None:
    """Serve until the client goes (stdio: stdin closed), SIGTERM or Ctrl-C; the executor is closed
    on the way out so no worker is left behind. With ``app`` (an SDK app whose tools are in
    ``executor``, see ``toolfork.mcp.app``) the app serves. ``callbacks``: see ``build_server``."""
    import anyio

    exit_on_signals([executor])
    try:
        if http is None:
            if app is not None:
                anyio.run(serve_app_stdio, app, wire)
            else:
                anyio.run(serve_stdio, executor, wire, callbacks)
        else:
            host, port = http
            anyio.run(serve_http, executor, host, port,
                      lambda url: print(f"toolfork mcp serve: listening on {url}", file=sys.stderr, flush=True),
                      app, callbacks)
    except KeyboardInterrupt:
        pass
    finally:
        from toolfork.executor.tracing.providers import flush

        executor.close()
        flush()  # the last calls' spans, after the close ended the open ones
        if callbacks is not None:
            callbacks.remove()


__all__ = ["ProgressRelay", "Wire", "build_server", "exit_on_signals", "progress_args", "run",
           "serve_app_stdio", "serve_http", "serve_stdio"]
