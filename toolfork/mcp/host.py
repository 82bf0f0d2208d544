"""Where an ``MCPConnector``'s client session lives: one asyncio loop thread in the host process.

Opening an MCP session costs a process start and a handshake (~0.9 s for a node server), a call on an
open one ~1.5 ms, so the session is opened once and kept. It is owned by a task on a loop thread of
the connector's own; calls reach it from wherever the executor runs them through the **relay**, a
Unix socket in a private directory (0700) that the loop serves:

    fork worker (or the host)                     connector's loop thread
    RemoteTool.__call__  --{"tool", "arguments"}-->  relay handler --call_tool--> MCP server
                         <--{"progress": ...}------                <--progress---
                         <--{"result"|"error"}-----                <--result-----

So the executor treats an MCP tool like any other tool: calls run concurrently on its workers (a
worker only waits on a socket), the executor's per-call timeout kills the worker at the deadline
("timeout"), and the relay, seeing the socket close, cancels the request, which makes the SDK send
the server ``notifications/cancelled``. Progress notifications become ``CallProgress`` events through
the worker's ``ToolRuntime``. Nothing of the SDK is imported in a worker.

A stdio server that exits fails the calls in flight (the relay says the server exited) and the session
is reopened by the next call; an HTTP server that cannot be reached gives an error result naming the
URL. ``close()`` ends the session, which stops the server process (the SDK closes its stdin, then
terminates its process tree), and the relay.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from toolfork.mcp.mapping import result_to_dict
from toolfork.mcp.options import ClientOptions, ListLimits

OPEN_TIMEOUT = 60.0  # seconds a server gets to start and answer the handshake


class MCPConnectionError(ConnectionError):
    """The MCP server could not be started or reached, or went away."""


class ServerTarget:
    """How to reach one MCP server: a command (stdio) or a URL (streamable HTTP)."""

    def __init__(self, command: str | None, args: list[str], env: dict[str, str] | None, cwd: str | None,
                 url: str | None, headers: dict[str, str] | None, auth: Any = None,
                 options: ClientOptions | None = None) -> None:
        if (command is None) == (url is None):
            raise ValueError("MCPConnector needs exactly one of command= (a stdio server) or url= (streamable HTTP)")
        if auth is not None and url is None:
            raise ValueError("MCPConnector(auth=...) is HTTP authorization: it needs url=, not a stdio command "
                             "(a stdio server takes its credentials from env=)")
        self.command, self.args, self.env, self.cwd = command, list(args), env, cwd
        self.url, self.headers, self.auth = url, dict(headers or {}), auth
        self.options = options or ClientOptions()

    def describe(self) -> str:
        if self.url is not None:
            return f"MCP server at {self.url}"
        return f"MCP server `{' '.join([self.command or '', *self.args]).strip()}`"

    def client(self, stack: contextlib.AsyncExitStack) -> Any:
        """An unopened ``mcp.Client``; what else must be closed with it goes on ``stack``."""
        from mcp import Client, StdioServerParameters

        if self.url is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            # The transport leaves a client it was given open: ours is closed with the session.
            http = create_mcp_http_client(headers=self.headers, auth=self.auth)
            stack.push_async_callback(http.aclose)
            transport = streamable_http_client(self.url, http_client=http)
            return Client(transport, cache=None, **self.options.client_kwargs())
        env = None
        if self.env is not None:
            from mcp.client.stdio import get_default_environment

            env = {**get_default_environment(), **self.env}
        return Client(StdioServerParameters(command=self.command or "", args=self.args, env=env, cwd=self.cwd),
                      cache=None, **self.options.client_kwargs())


_HOSTS: dict[str, tuple[int, weakref.ref[Host]]] = {}  # relay address -> (owning pid, host)


def end_session(address: str) -> None:
    """End the session of the host serving ``address``, if this process owns one."""
    entry = _HOSTS.get(address)
    host = entry[1]() if entry is not None and entry[0] == os.getpid() else None
    if host is not None:
        host.end_session()


class Host:
    """The loop thread, the open session and the relay of one connector."""

    def __init__(self, target: ServerTarget) -> None:
        self.target = target
        self._dir = tempfile.mkdtemp(prefix="toolfork-mcp-")
        self.address = os.path.join(self._dir, "relay.sock")
        _HOSTS[self.address] = (os.getpid(), weakref.ref(self))
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._relay: asyncio.AbstractServer | None = None
        self._client: Any = None  # the open mcp.Client, or None
        self._owner: asyncio.Task[None] | None = None  # the task that holds the session open
        self._stop: asyncio.Event | None = None
        self._opening: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.opened = 0  # sessions opened so far (a restart opens one more)

    # ------------------------------------------------------------ thread side (any thread)

    def start(self) -> None:
        """Start the loop thread and the relay (again, after ``close``)."""
        with self._lock:
            if self._thread is not None:
                return
            os.makedirs(self._dir, mode=0o700, exist_ok=True)
            loop = asyncio.new_event_loop()
            ready: Future[None] = Future()
            thread = threading.Thread(target=self._run, args=(loop, ready), name="toolfork-mcp", daemon=True)
            thread.start()
            ready.result(30)
            self._loop, self._thread = loop, thread

    def run(self, coro: Any, timeout: float | None = None) -> Any:
        """Run a coroutine on the loop thread and wait for its outcome; at ``timeout`` it is cancelled
        (work the caller was told has failed does not go on behind its back) and TimeoutError raised."""
        self.start()
        assert self._loop is not None
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            if future.done():  # the coroutine's own TimeoutError (one class with FutureTimeout from 3.11)
                raise
            future.cancel()
            raise TimeoutError(f"no answer from the {self.target.describe()} in {timeout:g}s") from None

    def end_session(self) -> None:
        """Stop the server (its session ends); the loop and the relay stay, and the next call reopens."""
        loop = self._loop
        if loop is not None and self._thread is not threading.current_thread():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._end_session(), loop).result(30)

    def close(self) -> None:
        """End the session (the server process with it) and the relay; the thread exits."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            if thread is not threading.current_thread():
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(15)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(15)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _run(self, loop: asyncio.AbstractEventLoop, ready: Future[None]) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start_relay())
        except BaseException as exc:
            ready.set_exception(exc)
            loop.close()
            return
        ready.set_result(None)
        try:
            loop.run_forever()
        finally:
            loop.close()

    # ------------------------------------------------------------ loop side

    async def _start_relay(self) -> None:
        self._opening = asyncio.Lock()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.address)
        self._relay = await asyncio.start_unix_server(self._serve, path=self.address)

    async def _shutdown(self) -> None:
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        for task in list(self._tasks):
            task.cancel()
        await self._end_session()

    async def _end_session(self) -> None:
        owner, stop = self._owner, self._stop
        self._client = self._owner = self._stop = None
        if owner is not None and stop is not None:
            stop.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(owner, 20)

    async def session(self) -> Any:
        """The open client, opening one (again, if the last one ended) when needed."""
        client = self._client
        if client is not None and self._owner is not None and not self._owner.done():
            return client
        assert self._opening is not None
        async with self._opening:
            if self._client is not None and self._owner is not None and not self._owner.done():
                return self._client
            await self._end_session()
            opened: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            stop = asyncio.Event()
            self._stop = stop
            self._owner = asyncio.ensure_future(self._own(opened, stop))
            try:
                self._client = await asyncio.wait_for(asyncio.shield(opened), OPEN_TIMEOUT)
            except BaseException as exc:
                await self._end_session()
                raise MCPConnectionError(f"could not connect to the {self.target.describe()}: "
                                         f"{_describe_exc(exc)}") from None
            self.opened += 1
            return self._client

    async def _own(self, opened: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """Hold one session open until told to stop (the SDK needs it entered and exited in one task)."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(self.target.client(stack))
                opened.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)

    async def list_tools(self, limits: ListLimits) -> list[Any]:
        """Every page of ``tools/list``, within ``limits``: a listing that is still going at its deadline
        (counted from the open session),
        runs past ``max_pages`` or sends a cursor it sent before is an error naming the server."""
        where = self.target.describe()
        client = await self.session()  # opening is bounded by OPEN_TIMEOUT; the deadline is the listing's
        try:
            return await asyncio.wait_for(self._walk_tools(client, limits.max_pages), limits.timeout_s)
        except asyncio.TimeoutError:
            raise TimeoutError(f"the {where} did not finish listing its tools in {limits.timeout_s:g}s "
                               "(list_timeout=); the listing was stopped") from None

    async def _walk_tools(self, client: Any, max_pages: int) -> list[Any]:
        where = self.target.describe()
        tools: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(max_pages):
            page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
            if cursor in seen:
                raise MCPConnectionError(f"the {where} sent the tools/list cursor {cursor[:80]!r} a second time "
                                         f"(after {len(tools)} tools): its listing never ends; stopped")
            seen.add(cursor)
        raise MCPConnectionError(f"the {where} listed {len(tools)} tools in {max_pages} pages and its listing "
                                 f"still had not ended; stopped (max_list_pages={max_pages})")

    async def call(self, name: str, arguments: dict[str, Any], timeout: float | None,
                   progress: Callable[[float, float | None, str | None], Any] | None) -> dict[str, Any]:
        """One tools/call as the plain dict the relay sends back."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = await self.session()
        try:
            # Client.call_tool, not the session's: it answers a server's input-required results (SEP-2322)
            # through the elicitation/sampling callbacks and retries, as a call of the SDK's own client does.
            result = await client.call_tool(name, arguments, read_timeout_seconds=timeout,
                                            progress_callback=progress)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            await self._end_session()  # the next call opens a new session (restarts the server)
            if self.target.url is not None:
                raise MCPConnectionError(f"the {self.target.describe()} closed the connection during the call "
                                         f"to {name!r}") from None
            raise MCPConnectionError(f"the {self.target.describe()} exited during the call to {name!r}; it is "
                                     "started again for the next call") from None
        except Exception as exc:
            if not _is_transport_error(exc):
                raise
            await self._end_session()
            raise MCPConnectionError(f"the {self.target.describe()} could not be reached during the call to "
                                     f"{name!r}: {_describe_exc(exc)}") from None
        return result_to_dict(result)

    # ------------------------------------------------------------ the relay

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._relay_call(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _relay_call(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        if not line:
            return
        request = json.loads(line)

        def send(message: dict[str, Any]) -> None:
            writer.write(json.dumps(message).encode() + b"\n")

        async def progress(value: float, total: float | None, message: str | None) -> None:
            send({"progress": {"progress": value, "total": total, "message": message}})

        call = asyncio.ensure_future(self.call(request["tool"], request.get("arguments") or {},
                                               request.get("timeout"), progress))
        gone = asyncio.ensure_future(reader.read(1))  # EOF: the caller was killed (deadline) or gave up
        try:
            await asyncio.wait({call, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not call.done():
                call.cancel()  # the SDK sends the server notifications/cancelled for it
                with contextlib.suppress(BaseException):
                    await call
            gone.cancel()
        if call.cancelled():
            return
        exc = call.exception()
        if exc is None:
            send({"result": call.result()})
        else:
            send({"error": {"type": type(exc).__name__, "message": _describe_exc(exc)}})
        with contextlib.suppress(ConnectionError):
            await writer.drain()


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio wraps transport errors in groups)."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not inner or not isinstance(inner, (list, tuple)):
            return exc
        exc = inner[0]


def _is_transport_error(exc: BaseException) -> bool:
    leaf = _innermost(exc)
    if isinstance(leaf, OSError):
        return True
    return any(cls.__name__ in ("TransportError", "StreamableHTTPError") for cls in type(leaf).__mro__)


def _describe_exc(exc: BaseException) -> str:
    """A readable one-line cause."""
    exc = _innermost(exc)
    if isinstance(exc, MCPConnectionError):
        return str(exc)
    if isinstance(exc, asyncio.TimeoutError):
        return "no answer in time"
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None)
    if isinstance(message, str):  # an MCPError: the server's (or the SDK's) own words
        return message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = ["OPEN_TIMEOUT", "Host", "MCPConnectionError", "ServerTarget"]
