"""The way back from a tool running in a fork worker to the MCP client of its call.

A tool served by ``toolfork mcp serve`` runs in a worker process, but logging to the client, asking it
for input (elicitation), asking its model (sampling) or reporting progress must go through the one
SDK session in the server process. The server listens on a Unix socket in a private directory (0700)
made before the pool forks, so every worker knows its path; a worker sends one request per connection
and waits for the answer:

    worker: (call id, "session.create_message", args, kwargs)  -->  server: the call's SDK context,
            <-- ("ok", value, awaited) | ("error", exception)          that attribute, called (awaited)

Requests are made and answered one at a time per call, so whatever the tool sent reaches the client
before the tool's result does. Each wait is bounded by the call's deadline (the worker is killed at it
anyway); a worker that dies mid-request closes its socket, which cancels the request's work in the
server.

What a worker sends is data, never a pickle: the tool in the worker may be code nobody reviewed (under
``--limits network=off`` or ``--sandbox``), and the server must not run any of it. A request is
msgpack (``toolfork.executor.wire.dataonly``: plain values, bytes, toolfork's own types) plus pydantic
models of the served app and of the SDK: a model class (an elicitation schema) by module and name, a
model (a ``SamplingMessage``) as that and its fields, validated again by the class. Names are resolved
only in the SDK's modules and those the server was told are the app's (``allow_module``), and only to
pydantic model classes: nothing else is looked up, nothing is called but the class's validation. The
answers go the other way pickled (the server is trusted; the SDK's pydantic models cross as they are).

Each call reaches only its own client's session: the server makes an unguessable capability for every
call it runs (``new_call_id``: the call's id carries 128 random bits) and knows the call only by it
while the call is in flight. A request that names no live call (a guess, another client's finished
call, a call id without its capability) is dropped and logged at WARNING; it reaches nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import pickle
import secrets
import shutil
import socket
import struct
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import msgpack

from toolfork.executor.wire import ceiling, dataonly

_counter = itertools.count(1)
_LEN = struct.Struct("<Q")
MAX_REQUEST = 64 << 20  # bytes of one request a worker may send (a bound, not a budget)
_CLASS_REF = 16  # msgpack extension type: (module, qualname) of a pydantic model class (an elicitation schema)
_MODEL = 17  # (module, qualname, fields) of a pydantic model (an SDK type, a SamplingMessage), validated again
_SDK_MODULES = frozenset({"mcp", "mcp_types"})  # the SDK's own models may cross too
log = logging.getLogger("toolfork.mcp")
_allowed_modules: set[str] = set()


def allow_module(name: str) -> None:
    """Let requests refer to classes of module ``name`` (the served app's module: its elicitation
    schemas). Set in the server before the pool forks."""
    _allowed_modules.add(name)


def new_call_id() -> str:
    """A call id that is also the call's capability on the callback socket: a counter for people to
    read, and 128 random bits nobody else can guess."""
    return f"mcp-{next(_counter)}-{secrets.token_urlsafe(16)}"


def _reference(module: str, qualname: str) -> Any:
    """A pydantic model class of the served app or of the SDK's types, by name; ValueError for any other."""
    from pydantic import BaseModel

    if not isinstance(module, str) or not isinstance(qualname, str) or not (
            module in _allowed_modules or module.split(".")[0] in _SDK_MODULES):
        raise ValueError(f"a reference to {str(module)[:80]}.{str(qualname)[:80]}, outside the served app")
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if part.startswith("_") or obj is None:
            raise ValueError(f"a reference to {module}.{qualname[:80]}, which is not reachable")
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
        raise ValueError(f"{module}.{qualname[:80]} is not a pydantic model class")
    return obj


def _extra_default(obj: Any, codec: dataonly.Codec) -> Any:
    from pydantic import BaseModel

    if isinstance(obj, type) and issubclass(obj, BaseModel):
        return msgpack.ExtType(_CLASS_REF, codec.pack((obj.__module__, obj.__qualname__)))
    if isinstance(obj, BaseModel):
        kind = type(obj)
        return msgpack.ExtType(_MODEL, codec.pack((kind.__module__, kind.__qualname__,
                                                   obj.model_dump(mode="json", by_alias=True))))
    return None


def _extra_ext(code: int, data: bytes, codec: dataonly.Codec) -> Any:
    if code == _CLASS_REF:
        module, qualname = codec.decode(data)
        return _reference(module, qualname)
    if code == _MODEL:
        module, qualname, fields = codec.decode(data)
        return _reference(module, qualname).model_validate(fields)
    raise ValueError(f"unknown extension type {code}")


_REQUESTS = dataonly.Codec(_extra_default, _extra_ext)


def encode_request(request: tuple[Any, ...]) -> bytes:
    """A worker's request as data (``dataonly.NotData``, a TypeError naming the type, for anything else)."""
    return _REQUESTS.encode(request)


def decode_request(data: bytes) -> tuple[str, str, tuple[Any, ...], dict[str, Any]]:
    """The server's reading of a request: (call id, path, args, kwargs); ValueError if it is not one."""
    value = _REQUESTS.decode(data, ceiling.DEFAULT)  # rebuilt within the host's ceiling (TooLarge: a ValueError)
    if (type(value) is not tuple or len(value) != 4 or not all(type(v) is str for v in value[:2])
            or type(value[2]) is not tuple or type(value[3]) is not dict):
        raise ValueError("not a (call id, path, args, kwargs) request")
    return value


class CallbackError(RuntimeError):
    """The server could not carry a tool's request to the client (the call is over, or the server gone)."""


class CallbackServer:
    """Server side: the SDK context of each call in flight, reachable from its worker by call id."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="toolfork-mcp-back-")
        os.chmod(self._dir, 0o700)
        self.address = os.path.join(self._dir, "callback.sock")
        self._targets: dict[str, Any] = {}
        self._server: asyncio.AbstractServer | None = None

    @contextlib.contextmanager
    def registered(self, call_id: str, target: Any) -> Iterator[None]:
        """While in the block, requests for ``call_id`` reach ``target`` (the call's SDK context)."""
        self._targets[call_id] = target
        try:
            yield
        finally:
            self._targets.pop(call_id, None)

    async def start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_unix_server(self._serve, path=self.address)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def remove(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readexactly(_LEN.size)
            size = _LEN.unpack(head)[0]
            if size > MAX_REQUEST:
                log.warning("callback socket: a request of %d bytes was dropped (over %d)", size, MAX_REQUEST)
                return
            try:
                call_id, path, args, kwargs = decode_request(await reader.readexactly(size))
            except (ValueError, TypeError, msgpack.UnpackException) as exc:
                log.warning("callback socket: a request that is not data was dropped: %s", exc)
                return
            if call_id not in self._targets:
                log.warning("callback socket: a request for no live call was dropped (%s %.40r)", path, call_id)
                return
            work = asyncio.ensure_future(self._perform(call_id, path, args, kwargs))
            gone = asyncio.ensure_future(reader.read(1))  # EOF: the worker died or gave up
            try:
                await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                gone.cancel()
                if not work.done():
                    work.cancel()
            if work.cancelled():
                return
            reply = _picklable(path, work.result())
            writer.write(_LEN.pack(len(reply)) + reply)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _perform(self, call_id: str, path: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        target = self._targets.get(call_id)
        if target is None:
            return ("error", CallbackError(f"{path}: the call {call_id!r} is over"))
        try:
            obj = target
            for part in path.split("."):
                if part.startswith("_"):
                    raise CallbackError(f"{path}: private names are not reachable from a tool")
                obj = getattr(obj, part)
            value = obj(*args, **kwargs)
            awaited = asyncio.iscoroutine(value) or isinstance(value, asyncio.Future)
            if awaited:
                value = await value
            if isinstance(value, Iterator):
                value = list(value)
            return ("ok", value, awaited)
        except Exception as exc:
            return ("error", exc)


def _picklable(path: str, reply: tuple[Any, ...]) -> bytes:
    """The reply as a pickle the worker can load: an SDK ``MCPError`` (whose constructor pickle cannot
    call again) as its code, message and data; anything else that does not survive the trip as a
    ``CallbackError`` naming it."""
    if reply[0] == "error" and hasattr(reply[1], "error") and hasattr(reply[1].error, "code"):
        error = reply[1].error
        reply = ("mcp_error", error.code, error.message, error.data)
    try:
        data = pickle.dumps(reply)
        pickle.loads(data)
        return data
    except Exception as exc:
        what = reply[1] if reply[0] == "error" else exc
        return pickle.dumps(("error", CallbackError(f"{path}: {type(what).__name__}: {what}")))


def request(address: str, call_id: str, path: str, args: tuple[Any, ...], kwargs: dict[str, Any],
            timeout: float | None) -> tuple[Any, bool]:
    """Worker side: ask the server to call ``path`` on the call's context; (value, whether it was
    awaited there). An exception raised there is raised here."""
    from toolfork.mcp.relay import READ_TIMEOUT_SLACK_S

    try:
        data = encode_request((call_id, path, tuple(args), kwargs))
    except TypeError as exc:
        raise CallbackError(f"{path}: {exc}") from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # The executor's deadline wins the race (it kills the worker: the call is "timeout"); this wait
        # ends a little later, for where nothing kills the call (sequential mode).
        sock.settimeout(None if timeout is None else timeout + READ_TIMEOUT_SLACK_S)
        try:
            sock.connect(address)
            sock.sendall(_LEN.pack(len(data)) + data)
            size = _LEN.unpack(_read(sock, _LEN.size))[0]
            reply = pickle.loads(_read(sock, size))
        except TimeoutError:
            raise TimeoutError(f"{path}: no answer from the client by the call's deadline") from None
        except OSError as exc:
            raise CallbackError(f"{path}: the MCP server cannot be reached ({exc})") from None
    finally:
        sock.close()
    if reply[0] == "mcp_error":
        from mcp.shared.exceptions import MCPError

        raise MCPError(code=reply[1], message=reply[2], data=reply[3])
    if reply[0] == "error":
        raise reply[1]
    return reply[1], reply[2]


def _read(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise CallbackError("the MCP server closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def client_link(address: str) -> Callable[[str, str, dict[str, Any], float | None], Any]:
    """Worker side of ``ToolRuntime.log`` / ``elicit`` / ``sample`` (``toolfork.tools.runtime``'s
    client link): the request goes to the call's ``ClientOps`` in the server."""

    def link(call_id: str, what: str, params: dict[str, Any], timeout: float | None) -> Any:
        return request(address, call_id, what, (), params, timeout)[0]

    return link


class ClientOps:
    """Server side of ``ToolRuntime.log`` / ``elicit`` / ``sample`` for one call of the low-level
    server: the SDK session's requests, tied to the call's request, answered as plain data.

    ``ask`` is set on a 2026-07-28 call (``rounds.PendingCall.ask``): there the question goes out in an
    input-required answer instead of a request mid-call, and ``ctx`` is the request of the current
    round (the retry replaces it)."""

    def __init__(self, ctx: Any, log_level: Callable[[Any], str | None],
                 ask: Callable[[Any], Awaitable[Any]] | None = None) -> None:
        self.ctx, self._log_level, self._ask = ctx, log_level, ask

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        from toolfork.tools.runtime import LOG_LEVELS

        wanted = self._log_level(self.ctx)  # logging/setLevel of a handshake session (2026-07-28: the SDK's opt-in)
        if wanted in LOG_LEVELS and LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted):
            return
        await _handshake_era(self.ctx.session.send_log_message, level, data, logger,
                             related_request_id=self.ctx.request_id)

    async def elicit(self, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        import mcp_types as types

        if self._ask is None:
            result = await self.ctx.session.elicit_form(message, schema, related_request_id=self.ctx.request_id)
        else:
            self._require("elicitation")
            request = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message,
                                                                               requested_schema=schema))
            result = _answer(types.ElicitResult, "elicitation", await self._ask(request))
        return {"action": result.action, "content": result.content}

    async def sample(self, messages: list[dict[str, Any]], max_tokens: int, **options: Any) -> dict[str, Any]:
        import mcp_types as types

        sampling = [types.SamplingMessage.model_validate(m) for m in messages]
        if self._ask is None:
            result = await _handshake_era(self.ctx.session.create_message, messages=sampling,
                                          max_tokens=max_tokens, related_request_id=self.ctx.request_id,
                                          **options)
        else:
            self._require("sampling")
            params = types.CreateMessageRequestParams(messages=sampling, max_tokens=max_tokens, **options)
            answer = await self._ask(types.CreateMessageRequest(params=params))
            kind = types.CreateMessageResultWithTools if isinstance(answer, types.CreateMessageResultWithTools) \
                else types.CreateMessageResult
            result = _answer(kind, "sampling", answer)
        dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=False, exclude_none=True)
        return dumped

    def _require(self, capability: str) -> None:
        """A 2026-07-28 request declares its client's capabilities; one it lacks is not asked for."""
        from toolfork.tools.runtime import ClientUnavailable

        declared = getattr(self.ctx.session, "client_capabilities", None)
        if declared is not None and getattr(declared, capability, None) is None:
            raise ClientUnavailable(f"{'elicit' if capability == 'elicitation' else 'sample'}: the client of this "
                                    f"call did not declare the {capability} capability")


def _handshake_era(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """Call an SDK session method the 2026-07-28 protocol deprecated (logging, sampling mid-call): on a
    handshake-era session it is still the protocol, so its MCPDeprecationWarning says nothing a user can
    act on. The warning is raised when the method is called, before the coroutine runs: no await here."""
    import warnings

    from mcp import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return method(*args, **kwargs)


def _answer(kind: Any, what: str, response: Any) -> Any:
    """The client's response to one input request, as the SDK model it must be."""
    if isinstance(response, kind):
        return response
    try:
        dumped = response.model_dump(by_alias=True) if hasattr(response, "model_dump") else response
        return kind.model_validate(dumped)
    except Exception as exc:
        raise CallbackError(f"{what}: the client's answer is not a {kind.__name__}: {exc}") from None


class RemoteContext:
    """Worker side: stands in for the SDK context of a call. Values read when the call was dispatched
    (``values``: dotted names, e.g. ``"session.client_capabilities"``) are plain attributes; anything
    else is a method of the real context, called in the server (awaitable where it is a coroutine
    there). ``local`` holds what the worker has itself (the app)."""

    def __init__(self, address: str, call_id: str, values: dict[str, Any], local: dict[str, Any],
                 deadline: Callable[[], float | None], prefix: str = "") -> None:
        self._address, self._call_id, self._values, self._local = address, call_id, values, local
        self._deadline, self._prefix = deadline, prefix

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        key = self._prefix + name
        if not self._prefix and name in self._local:
            return self._local[name]
        if key in self._values:
            return self._values[key]
        if any(k.startswith(key + ".") for k in self._values):
            return RemoteContext(self._address, self._call_id, self._values, {}, self._deadline, key + ".")
        return _RemoteMethod(self, key)

    def _request(self, path: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, bool]:
        return request(self._address, self._call_id, path, args, kwargs, self._deadline())


class _RemoteMethod:
    def __init__(self, context: RemoteContext, path: str) -> None:
        self._context, self._path = context, path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Sent now, in the order the tool calls: an awaited one is awaitable here as it was there.
        value, awaited = self._context._request(self._path, args, kwargs)
        return _Ready(value) if awaited else value


class _Ready:
    """An awaitable that is already done (the request was answered when the method was called)."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def __await__(self) -> Any:
        return self._value
        yield  # pragma: no cover (makes this a generator)


__all__ = ["CallbackError", "CallbackServer", "ClientOps", "RemoteContext", "client_link", "request"]
