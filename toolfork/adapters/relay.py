"""Host objects a worker uses during one call: reached over a unix socket, served by the waiting caller.

A framework's tool often uses objects that live in the host and cannot be copied into a worker: the
graph's store, its stream writer, the interrupt bookkeeping of the running task, its checkpointer. A
copy would be wrong even where one could be made (a write must land in the host's store, an interrupt
counter is shared by the calls of one task). So the call carries *references* instead: the host puts
each such object in the call's ``CallObjects`` and sends a ``Ref`` (socket address, session token, slot);
in the worker a proxy built on the ``Ref`` turns each attribute read or method call into a request.

Who answers: the host thread (or task) that waits for the call's result. It serves the call's requests
one at a time, in the order they come, in its own thread and context (the context variables LangGraph
reads, the event loop of an async graph), until the result arrives. So a tool's stream-writer events
reach the host in the order the tool wrote them, and a host object is never used from two threads at
once on behalf of one call. One listening socket per host process (a daemon thread accepts; each
connection's request is read by a short-lived thread of its own, so a slow or silent peer holds up no
other call, then handed to its session); a worker opens one connection per request.

A request starts with its session's token, as plain bytes: the host unpickles nothing from a
connection that does not name a live session. What crosses is pickled (a sandboxed call gets no
reference to a host object, so it never reaches this channel). A value the host cannot pickle comes
back as another reference; a host coroutine is awaited (by an async caller) or run to completion (by a
sync one); a host iterator comes back as a list. Killing the worker (timeout, crash) closes its
connection: nothing waits on it.

Imports no framework (the framework's own proxy classes build on ``Ref.call``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import inspect
import os
import pickle
import queue
import secrets
import shutil
import socket
import struct
import tempfile
import threading
from collections import Counter, OrderedDict, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from toolfork.adapters._common import carry_exception, rebuild_exception

_LEN = struct.Struct("<Q")
READ_TIMEOUT_S = 30.0  # a worker sends its request at once; a peer that stalls longer is dropped
TOKEN_BYTES = 32  # a session token: 16 random bytes in hex, sent ahead of every request
_DONE = object()  # put in a session's queue when the call's result is there


class RelayError(RuntimeError):
    """A worker could not reach the host object it was given (the call it belongs to is over)."""


# ----------------------------------------------------------------------------- wire

def _send(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LEN.pack(len(data)) + data)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    parts = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("the relay connection closed")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _recv(sock: socket.socket) -> Any:
    (n,) = _LEN.unpack(_read_exact(sock, _LEN.size))
    return pickle.loads(_read_exact(sock, n))


# ----------------------------------------------------------------------------- host: the server

class _Server:
    """The host's listening socket; hands each request to the session its token names."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.dir = tempfile.mkdtemp(prefix="toolfork-relay-")
        self.address = os.path.join(self.dir, "relay")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.address)
        self.sock.listen(128)
        self.sessions: dict[str, Callable[[Any], None]] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, name="toolfork-relay", daemon=True).start()
        atexit.register(shutil.rmtree, self.dir, True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            # A reader per connection: a peer that connects and stays silent (or sends slowly) holds its
            # own reader for READ_TIMEOUT_S, never the accept loop or another call's requests.
            threading.Thread(target=self._read, args=(conn,), name="toolfork-relay-read", daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(READ_TIMEOUT_S)
            # The token comes first, as plain bytes: nothing is unpickled for a connection that does not
            # name a live session (any process that can reach the socket could send a pickle).
            token = _read_exact(conn, TOKEN_BYTES).decode("ascii", "replace")
            with self.lock:
                deliver = self.sessions.get(token)
            if deliver is None:
                _reply(conn, ("raise", carry_exception(RelayError(
                    "the call this host object belongs to is over; it can be used only during the call"))))
                return
            request = _recv(conn)
            conn.settimeout(None)
        except Exception:
            conn.close()
            return
        deliver((conn, request))


_server: _Server | None = None
_server_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _server_lock:
        if _server is None or _server.pid != os.getpid():
            _server = _Server()
        return _server


def _reply(conn: socket.socket, answer: Any) -> None:
    try:
        _send(conn, answer)
    except Exception:
        pass  # the worker is gone (killed at its deadline): nobody to answer
    finally:
        conn.close()


# ----------------------------------------------------------------------------- host: one call

class CallObjects:
    """The host objects of one call, and the queue of the worker's requests about them.

    ``ref(obj)`` registers an object and returns the ``Ref`` to send; ``serve_until(done)`` (sync) or
    ``aserve_until(awaitable)`` (async) answers requests until the call's result is there."""

    def __init__(self) -> None:
        self.server = _the_server()
        self.token = secrets.token_hex(TOKEN_BYTES // 2)
        self.objects: list[Any] = []
        self._sync_queue: queue.Queue[Any] | None = None
        self._async_queue: asyncio.Queue[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def ref(self, obj: Any) -> Ref:
        self.objects.append(obj)
        cls = type(obj)
        async_names = frozenset(n for n in dir(cls) if not n.startswith("__")
                                and inspect.iscoroutinefunction(getattr(cls, n, None)))
        return Ref(self.server.address, self.token, len(self.objects) - 1, async_names)

    # -- serving
    def serve_until(self, submit: Callable[[], Any]) -> Any:
        """Start the call (``submit()`` returns a Future), answer requests in this thread until it is
        done, return its result."""
        self._sync_queue = q = queue.Queue[Any]()
        self._open(q.put)
        try:
            future = submit()
            future.add_done_callback(lambda _f: q.put(_DONE))
            while (item := q.get()) is not _DONE:
                conn, request = item
                _reply(conn, self._answer_sync(request))
            return future.result()
        finally:
            self._close()

    async def aserve_until(self, start: Callable[[], Any]) -> Any:
        """As ``serve_until`` for an async caller: ``start()`` returns an awaitable; requests are
        answered on this event loop, in this task's context."""
        loop = asyncio.get_running_loop()
        self._async_queue = aq = asyncio.Queue[Any]()

        def deliver(item: Any) -> None:
            loop.call_soon_threadsafe(aq.put_nowait, item)

        self._open(deliver)
        task = asyncio.ensure_future(start())
        task.add_done_callback(lambda _t: aq.put_nowait(_DONE))
        try:
            while (item := await aq.get()) is not _DONE:
                conn, request = item
                _reply(conn, await self._answer_async(request))
            return task.result()
        finally:
            if not task.done():
                task.cancel()
            self._close()

    def _open(self, deliver: Callable[[Any], None]) -> None:
        with self.server.lock:
            self.server.sessions[self.token] = deliver

    def _close(self) -> None:
        with self.server.lock:
            self.server.sessions.pop(self.token, None)
        for q in (self._sync_queue,):
            while q is not None and not q.empty():
                item = q.get_nowait()
                if item is not _DONE:
                    _reply(item[0], ("raise", carry_exception(RelayError("the call is over"))))

    # -- answering one request
    def _target(self, request: tuple[Any, ...]) -> tuple[str, Any]:
        op, slot, name = request[0], request[1], request[2]
        obj = self.objects[slot]
        if op == "getattr":
            return "getattr", getattr(obj, name)
        if op == "listop":  # request[3] is (method, *arguments): the host container gets the same change
            return "call", getattr(obj if name is None else getattr(obj, name), request[3][0])
        return "call", (obj if name is None else getattr(obj, name))

    def _answer_sync(self, request: tuple[Any, ...]) -> Any:
        try:
            kind, target = self._target(request)
            if kind == "getattr":
                return self._encode_attr(target)
            args = request[3][1:] if request[0] == "listop" else request[3]
            value = target(*args, **request[4])
            if request[0] == "listop" and value is getattr(target, "__self__", None):
                return "value", None  # an in-place operator returns the container: the worker has its copy
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            elif inspect.isasyncgen(value):
                value = asyncio.run(_collected(value))
            return self._encode(value)
        except Exception as exc:
            return "raise", carry_exception(exc)

    async def _answer_async(self, request: tuple[Any, ...]) -> Any:
        try:
            kind, target = self._target(request)
            if kind == "getattr":
                return self._encode_attr(target)
            if request[0] == "listop":
                value = target(*request[3][1:], **request[4])
                return ("value", None) if value is getattr(target, "__self__", None) else self._encode(value)
            obj, name = self.objects[request[1]], request[2]
            # An async caller uses the host object's coroutine twin where it has one (``batch`` ->
            # ``abatch``): an async store or checkpointer may refuse sync calls on the event loop.
            twin = getattr(obj, "a" + name, None) if isinstance(name, str) else None
            if twin is not None and inspect.iscoroutinefunction(twin):
                target = twin
            value = target(*request[3], **request[4])
            if inspect.isawaitable(value):
                value = await value
            elif inspect.isasyncgen(value):
                value = await _collected(value)
            return self._encode(value)
        except Exception as exc:
            return "raise", carry_exception(exc)

    def _encode_attr(self, value: Any) -> Any:
        if callable(value) and not isinstance(value, type):
            return ("callable",)
        if type(value) is list:
            return "list", self._encode(value)
        return self._encode(value)

    def _encode(self, value: Any) -> Any:
        if isinstance(value, Iterator) and not isinstance(value, (str, bytes, list, tuple, dict)):
            value = list(value)
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            return "ref", self.ref(value)
        return "value", value


async def _awaited(value: Any) -> Any:
    return await value


async def _collected(agen: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in agen]


# ----------------------------------------------------------------------------- worker: references

class Ref:
    """Where a host object is: picklable, sent with the call; ``call`` makes a request."""

    __slots__ = ("address", "async_names", "slot", "token")

    def __init__(self, address: str, token: str, slot: int, async_names: frozenset[str]) -> None:
        self.address, self.token, self.slot, self.async_names = address, token, slot, async_names

    def __reduce__(self) -> tuple[Any, ...]:
        return (Ref, (self.address, self.token, self.slot, self.async_names))

    def request(self, op: str, name: str | None, *args: Any, **kwargs: Any) -> Any:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                sock.connect(self.address)
            except OSError as exc:
                raise RelayError(f"the host process cannot be reached ({exc}); host objects can be used "
                                 "only during the call they came with") from None
            request = (op, self.slot, name, args, kwargs)
            sock.sendall(self.token.encode("ascii"))
            try:
                _send(sock, request)
            except (pickle.PicklingError, TypeError, AttributeError):
                _send(sock, _sendable(request))
            answer = _recv(sock)
        finally:
            sock.close()
        return self._decode(answer, name)

    def _decode(self, answer: tuple[Any, ...], name: str | None) -> Any:
        kind = answer[0]
        if kind == "value":
            return answer[1]
        if kind == "ref":
            return RemoteObject(answer[1])
        if kind == "list":
            return RemoteList(self._decode(answer[1], name), self, name)  # type: ignore[operator]
        if kind == "callable":
            return _remote_method(self, name)
        raise rebuild_exception(answer[1])

    def call(self, name: str | None, *args: Any, **kwargs: Any) -> Any:
        return self.request("call", name, *args, **kwargs)

    async def acall(self, name: str | None, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.request, "call", name, *args, **kwargs)


def _sendable(value: Any) -> Any:
    """``value`` with the dict entries that do not pickle left out: a worker's own machinery in a config
    it passes to a host object (a checkpointer reads the config's plain values only)."""
    if type(value) is dict:
        out = {}
        for k, v in value.items():
            v = _sendable(v)
            try:
                pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                continue
            out[k] = v
        return out
    if type(value) in (list, tuple):
        return type(value)(_sendable(v) for v in value)
    return value


def _remote_method(ref: Ref, name: str | None) -> Callable[..., Any]:
    if name is not None and name in ref.async_names:
        async def amethod(*args: Any, **kwargs: Any) -> Any:
            return await ref.acall(name, *args, **kwargs)
        return amethod

    def method(*args: Any, **kwargs: Any) -> Any:
        return ref.call(name, *args, **kwargs)
    return method


class RemoteObject:
    """A host object seen from a worker: attribute reads and calls are requests to the host."""

    def __init__(self, ref: Ref) -> None:
        object.__setattr__(self, "_ref", ref)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._ref.request("getattr", name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ref.call(None, *args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RemoteObject, (self._ref,))

    def __repr__(self) -> str:
        return f"<host object {self._ref.slot} of a toolfork call>"


# How a change made in the worker is made to the host's container, where the same call would not do
# the same there: an in-place operator becomes the method it stands for. (method, args, its return
# value) -> the host's (method, args).
HostOp = Callable[[tuple[Any, ...], Any], tuple[str, tuple[Any, ...]]]


def _as(method: str) -> HostOp:
    return lambda args, value: (method, args)


# Changes whose outcome depends on what the container holds (which item ``set.pop`` takes, whether
# ``setdefault`` finds the key): the host's container decides, since calls running at once share it. The
# change is made there first (a round trip; the host's answer, or its exception, is the worker's), and
# the copy then follows that answer. (copy, base class, args, the host's answer) -> None.
Follow = Callable[[Any, Any, tuple[Any, ...], Any], None]


def _follow_pop_index(copy: Any, base: Any, args: tuple[Any, ...], value: Any) -> None:
    with contextlib.suppress(IndexError):
        base.pop(copy, *args)


def _follow_remove(copy: Any, base: Any, args: tuple[Any, ...], value: Any) -> None:
    with contextlib.suppress(ValueError):
        base.remove(copy, args[0])


def _follow_pop_key(copy: Any, base: Any, args: tuple[Any, ...], value: Any) -> None:
    base.pop(copy, args[0], None)


def _follow_popitem(copy: Any, base: Any, args: tuple[Any, ...], value: Any) -> None:
    base.pop(copy, value[0], None)


def _follow_setdefault(copy: Any, base: Any, args: tuple[Any, ...], value: Any) -> None:
    base.__setitem__(copy, args[0], value)


def _follow_discard(copy: Any, base: Any, args: tuple[Any, ...], value: Any) -> None:
    base.discard(copy, value if not args else args[0])


_LIST_DECIDED: dict[str, Follow] = {"pop": _follow_pop_index, "remove": _follow_remove}
_DICT_DECIDED: dict[str, Follow] = {"pop": _follow_pop_key, "popitem": _follow_popitem,
                                    "setdefault": _follow_setdefault}
_SET_DECIDED: dict[str, Follow] = {"pop": _follow_discard, "remove": _follow_discard}


def _whole(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Iterator arguments (a generator, ``zip``, ``map``) taken whole: the worker's change would consume
    them, and the host would get an exhausted one (or none: a generator does not pickle)."""
    if not any(isinstance(a, Iterator) for a in args):
        return args
    return tuple(list(a) if isinstance(a, Iterator) else a for a in args)


def _mirroring(base: type, names: tuple[str, ...], host_ops: dict[str, HostOp] | None = None,
               init: Callable[[Any, Any], None] | None = None,
               rebuild: Callable[[Any], tuple[Any, ...]] | None = None,
               decided: dict[str, Follow] | None = None) -> Any:
    """A ``base`` subclass whose changing methods change the copy and, through the relay, the host's
    container too; reads see the copy (the host's contents when the call began, with the call's own
    changes). Pickles as a plain ``base``. ``host_ops``: the changes the host makes another way (see
    ``HostOp``); ``decided``: the changes the host's container decides (see ``Follow``);
    ``init``/``rebuild``: how a ``base`` is built from the host's copy and pickled, where ``base(copy)``
    would not (a defaultdict keeps its factory)."""
    ops = host_ops or {}
    follows = decided or {}

    def make(name: str) -> Callable[..., Any]:
        follow = follows.get(name)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            me = threading.get_ident()
            if self._ref is None or me in self._inside:  # filling the copy (an OrderedDict's __init__
                return getattr(base, name)(self, *args, **kwargs)  # calls update), or a step of a change
            # relayed whole (Counter.update sets items one by one: the host gets the update alone). Per
            # thread: another thread of the tool changing the container meanwhile is relayed as usual.
            args = _whole(args)
            if follow is not None:
                return _decided_by_host(self, base, name, follow, me, args, kwargs)
            self._inside.add(me)
            try:
                value = getattr(base, name)(self, *args, **kwargs)
            finally:
                self._inside.discard(me)
            op, host_args = ops[name](args, value) if name in ops else (name, args)
            try:
                pickle.dumps((host_args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                return value  # what cannot travel stays in the worker's copy (docs/adapters.md says so)
            self._ref.request("listop", self._name, op, *host_args, **kwargs)
            return value
        method.__name__ = name
        return method

    def setup(self: Any, items: Any, ref: Ref, name: str | None) -> None:
        self._ref, self._name, self._inside = None, name, set()
        if init is None:
            base.__init__(self, items)  # type: ignore[misc]
        else:
            init(self, items)
        self._ref = ref

    namespace: dict[str, Any] = {name: make(name) for name in (*names, *follows)}
    namespace["__init__"] = setup
    namespace["__reduce__"] = (lambda self: (base, (base(self),))) if rebuild is None else rebuild
    return namespace


_LIST_OPS = ("append", "extend", "insert", "clear", "sort", "reverse", "__setitem__", "__delitem__", "__iadd__",
             "__imul__")
_DICT_OPS = ("__setitem__", "__delitem__", "update", "clear", "__ior__")
_DICT_HOST_OPS: dict[str, HostOp] = {"__ior__": _as("update")}
_SET_OPS = ("add", "discard", "update", "clear", "difference_update", "intersection_update",
            "symmetric_difference_update", "__ior__", "__iand__", "__isub__", "__ixor__")
_SET_HOST_OPS: dict[str, HostOp] = {
    "__ior__": _as("update"), "__iand__": _as("intersection_update"),
    "__isub__": _as("difference_update"), "__ixor__": _as("symmetric_difference_update")}
# A Counter's operators are its own (``|=`` keeps the larger count, ``+=`` adds and drops what is not
# positive): the host runs the same operator.
_COUNTER_OPS = (*_DICT_OPS, "subtract", "__iadd__", "__isub__", "__iand__")


def _decided_by_host(copy: Any, base: Any, name: str, follow: Follow, me: int, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    """A change the host's container decides (see ``Follow``): made there, then followed in the copy."""
    value = copy._ref.request("listop", copy._name, name, *args, **kwargs)
    copy._inside.add(me)
    try:
        follow(copy, base, args, value)
    finally:
        copy._inside.discard(me)
    return value


RemoteList = type("RemoteList", (list,), _mirroring(list, _LIST_OPS, {"__iadd__": _as("extend")},
                                                    decided=_LIST_DECIDED))
RemoteList.__doc__ = """A host list, in a worker: read as a copy, changes also reach the host's list (LangGraph's
interrupt appends the resume value it consumed; a tool appends to a list it closes over)."""
RemoteDict = type("RemoteDict", (dict,), _mirroring(dict, _DICT_OPS, _DICT_HOST_OPS, decided=_DICT_DECIDED))
RemoteSet = type("RemoteSet", (set,), _mirroring(set, _SET_OPS, _SET_HOST_OPS, decided=_SET_DECIDED))
# A defaultdict's missing key is filled through __setitem__, so counting in one (``calls[name] += 1``)
# reaches the host too; the factory must pickle for the container to be mirrored at all.
RemoteDefaultDict = type("RemoteDefaultDict", (defaultdict,), _mirroring(
    defaultdict, _DICT_OPS, _DICT_HOST_OPS,
    init=lambda self, items: defaultdict.__init__(self, items.default_factory, items),
    rebuild=lambda self: (defaultdict, (self.default_factory, dict(self))), decided=_DICT_DECIDED))
RemoteOrderedDict = type("RemoteOrderedDict", (OrderedDict,), _mirroring(
    OrderedDict, (*_DICT_OPS, "move_to_end"), _DICT_HOST_OPS, decided=_DICT_DECIDED))
RemoteCounter = type("RemoteCounter", (Counter,), _mirroring(
    Counter, _COUNTER_OPS, rebuild=lambda self: (Counter, (dict(self),)), decided=_DICT_DECIDED))
_MIRRORS: dict[type, type] = {list: RemoteList, dict: RemoteDict, set: RemoteSet, defaultdict: RemoteDefaultDict,
                              OrderedDict: RemoteOrderedDict, Counter: RemoteCounter}


def mirror(container: Any, ref: Ref) -> Any:
    """The worker's stand-in for a host list, dict (defaultdict, OrderedDict, Counter) or set registered
    as ``ref``."""
    return _MIRRORS[type(container)](container, ref, None)


def mirrorable(value: Any) -> bool:
    return type(value) in _MIRRORS


__all__ = [
    "READ_TIMEOUT_S",
    "CallObjects",
    "Ref",
    "RelayError",
    "RemoteCounter",
    "RemoteDefaultDict",
    "RemoteDict",
    "RemoteList",
    "RemoteObject",
    "RemoteOrderedDict",
    "RemoteSet",
    "mirror",
    "mirrorable",
]
