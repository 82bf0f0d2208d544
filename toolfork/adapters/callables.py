"""Run a framework's own Python function tool in the fork pool, its arguments already validated.

The Agents SDK's ``function_tool`` and pydantic-ai's function tools validate the model's arguments
themselves (pydantic models, context objects) and then call a plain Python function. To keep every one
of the framework's rules and still run the function in a worker, only that last step crosses the
process boundary: the function and its ready arguments go to a worker serialized with dill (a
module-level function by reference, a closure or a local class by value), and what comes back is the
function's return value, or the exception it raised, rebuilt in the host with its own type. A value or
exception that cannot be serialized is refused with an error that names it, never turned into text.

Every such call is one call of a single toolfork tool, ``toolfork_callable``, added once to the
Executor. ``pooled_call`` / ``apooled_call`` raise :class:`NotShippable` when the function or its
arguments cannot be serialized, before anything runs: the adapter then runs the function in the host,
as the framework would.

The default Executor (``default_executor()``) is the one a decorator uses when it is given none: made
on first use with the process's defaults, shared by every tool of the process, closed at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

import dill

from toolfork.adapters._common import SandboxRefused, attach, call_id, failure_reason, sandboxed
from toolfork.adapters.host_state import (
    AttributeChanges,
    apply_attribute_changes,
    attribute_changes,
    attribute_state,
    host_containers,
    mirrored,
)
from toolfork.adapters.relay import CallObjects
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.executor.wire import ceiling, dataonly
from toolfork.tools.decorator import tool
from toolfork.tools.output import ToolOutput

RUNNER = "toolfork_callable"
log = logging.getLogger("toolfork.adapters.callables")


class NotShippable(Exception):
    """The function or its arguments cannot be serialized for a worker: run it in the host instead."""


class PoolCallFailed(RuntimeError):
    """The call did not come back with the function's own outcome: it timed out, its worker crashed, or
    the worker could not rebuild what it was sent. ``result`` is its ``ToolResult``."""

    def __init__(self, result: ToolResult) -> None:
        self.result = result
        super().__init__(failure_reason(result))


class UnsendableResult(RuntimeError):
    """The function ran in a worker but its return value (or exception) cannot be serialized back."""


def _sendable(value: Any) -> bool:
    try:
        dill.dumps(value)
    except Exception:
        return False
    return True


def _pack(kind: str, value: Any, changes: AttributeChanges | None) -> bytes:
    try:
        return bytes(dill.dumps((kind, value, changes)))
    except Exception as exc:
        what = "exception" if kind == "raised" else "return value"
        why = (f"the function's {what} of type {type(value).__qualname__} cannot be sent back from the worker "
               f"({type(exc).__name__}: {str(exc)[:200]}); return a picklable value, or run this tool in the host")
        if kind == "raised":
            why += f"; the exception was {type(value).__name__}: {value}"
        return bytes(dill.dumps(("unsendable", why, changes)))


def _pack_data(kind: str, value: Any) -> bytes:
    """A sandboxed call's outcome as data (``wire.dataonly``): the host rebuilds no object of the call's,
    so an exception crosses as its type name, message and traceback text."""
    if kind == "raised":
        value = (type(value).__name__, str(value), "".join(traceback.format_exception(value)))
    try:
        return dataonly.encode((kind, value))
    except TypeError as exc:
        return dataonly.encode(("unsendable", f"the function's return value cannot leave its sandbox: {exc}"))


@tool(name=RUNNER)
def run_callable(payload: bytes, data_only: bool = False) -> ToolOutput:
    """Call a serialized function with its arguments (the adapters' worker side); internal.
    ``data_only``: the call is sandboxed, its outcome goes back as data (and no host state is mirrored)."""
    fn, args, kwargs, awaits, mirrors = dill.loads(payload)
    with mirrored(mirrors, lambda _owner: fn):  # the host's containers get the call's changes
        before = attribute_state(fn)
        try:
            value = fn(*args, **kwargs)
            kind = "ok"
            if awaits:
                value = asyncio.run(_wait(value))
            elif inspect.isawaitable(value):  # a sync function that returns an awaitable: its value comes
                value, kind = asyncio.run(_wait(value)), "awaitable"  # back as an awaitable of that value
        except Exception as exc:
            if data_only:
                return ToolOutput(data=_pack_data("raised", exc))
            return ToolOutput(data=_pack("raised", exc, attribute_changes(fn, before, _sendable)))
        if data_only:
            return ToolOutput(data=_pack_data(kind, value))
        changes = attribute_changes(fn, before, _sendable)
    return ToolOutput(data=_pack(kind, value, changes))


class SandboxedCallError(RuntimeError):
    """A sandboxed function raised: its exception crossed as data. ``type_name`` is its type's name,
    ``traceback_text`` its traceback, as text."""

    def __init__(self, type_name: str, message: str, traceback_text: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.traceback_text = type_name, traceback_text


async def _wait(awaitable: Any) -> Any:
    return await awaitable


async def _ready(value: Any) -> Any:
    return value


_attach_lock = threading.Lock()


def _dispatch(executor: Executor, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], awaits: bool,
              hint: str | None) -> tuple[ToolCall, CallObjects | None]:
    sessions: list[CallObjects] = []

    def session() -> CallObjects:  # made only for a function that holds host containers
        sessions.append(CallObjects())
        return sessions[0]

    data_only = sandboxed(executor, RUNNER)
    # A sandboxed call gets no reference to the host's objects (their relay would unpickle its requests).
    mirrors = [] if data_only else host_containers([("", fn)], session)
    try:
        payload = bytes(dill.dumps((fn, args, kwargs, awaits, mirrors), recurse=True))
    except Exception as exc:
        if data_only:
            raise SandboxRefused(f"tool {getattr(fn, '__name__', fn)!r} was not run: its calls are sandboxed "
                                 f"(the Executor's limits), and it cannot be sent to a sandbox ({type(exc).__name__}: "
                                 f"{exc}); a sandboxed call never runs in the host") from exc
        raise NotShippable(f"{type(exc).__name__}: {exc}") from exc
    if RUNNER not in executor.tools:
        with _attach_lock:  # the first calls of several threads (sync tools) race to add it
            if RUNNER not in executor.tools:
                attach([run_callable], executor, {})
    arguments: dict[str, Any] = {"payload": payload, "data_only": True} if data_only else {"payload": payload}
    return ToolCall(call_id(hint), RUNNER, arguments), (sessions[0] if sessions else None)


def _outcome(result: ToolResult, fn: Any, data_only: bool = False) -> Any:
    if result.status != "ok" or result.output is None or not isinstance(result.output.data, bytes):
        raise PoolCallFailed(result)
    if data_only:
        return _data_outcome(result.output.data)
    kind, value, changes = dill.loads(result.output.data)
    apply_attribute_changes(fn, changes, log)
    if kind == "ok":
        return value
    if kind == "awaitable":
        return _ready(value)
    if kind == "raised":
        raise value
    raise UnsendableResult(value)


def _data_outcome(data: bytes) -> Any:
    """A sandboxed call's outcome, decoded as data: its value, or ``SandboxedCallError`` for what it raised."""
    try:
        kind, value = dataonly.decode(data, ceiling.DEFAULT)  # a value shared 12,000 times is 12,000 copies here
    except (ValueError, TypeError) as exc:
        raise UnsendableResult(f"the sandboxed call's outcome is not data: {exc}") from None
    if kind == "ok":
        return value
    if kind == "awaitable":
        return _ready(value)
    if kind == "raised" and isinstance(value, tuple) and len(value) == 3 and all(isinstance(v, str) for v in value):
        raise SandboxedCallError(*value)
    raise UnsendableResult(str(value))


def pooled_call(executor: Executor, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                awaits: bool = False, hint: str | None = None) -> Any:
    """``fn(*args, **kwargs)`` in a worker, blocking this thread; raises what ``fn`` raised.
    ``awaits``: ``fn`` is a coroutine function (its coroutine is run to completion in the worker)."""
    call, session = _dispatch(executor, fn, args, kwargs, awaits, hint)
    if "data_only" in call.arguments:
        return _outcome(executor.submit(call).result(), fn, data_only=True)
    if session is None:
        return _outcome(executor.submit(call).result(), fn)
    return _outcome(session.serve_until(lambda: executor.submit(call)), fn)


async def apooled_call(executor: Executor, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                       awaits: bool = False, hint: str | None = None) -> Any:
    """``pooled_call`` for asyncio hosts: cancelling the awaiting task stops the call (the worker is
    killed and replaced), so the framework's own timeouts end stuck calls for real."""
    call, session = _dispatch(executor, fn, args, kwargs, awaits, hint)
    if "data_only" in call.arguments:
        return _outcome(await executor.acall(call), fn, data_only=True)
    if session is None:
        return _outcome(await executor.acall(call), fn)
    return _outcome(await session.aserve_until(lambda: executor.acall(call)), fn)


Args = tuple[Any, ...]


def stand_in(fn: Callable[..., Any], is_async: bool, executor: Executor | None,
             for_worker: Callable[[Args], Args], hint: Callable[[Args], str | None],
             log: logging.Logger) -> Callable[..., Any]:
    """What a framework calls instead of ``fn``: the same call in a worker (``executor``, else the
    default one), with the positional arguments as ``for_worker`` makes them (a context copied without
    the host's live objects); in the host, with the original arguments, when they cannot be
    serialized. Async when ``fn`` is; a sync stand-in blocks its thread (frameworks call sync tools in
    threads of their own)."""
    if is_async:
        async def in_pool(*args: Any, **kwargs: Any) -> Any:
            try:
                return await apooled_call(executor or default_executor(), fn, for_worker(args), kwargs,
                                          awaits=True, hint=hint(args))
            except NotShippable as why:
                log.warning("tool %s runs in the host (no timeout, no limits): %s", getattr(fn, "__name__", fn), why)
                return await fn(*args, **kwargs)

        return in_pool

    def in_pool_sync(*args: Any, **kwargs: Any) -> Any:
        try:
            return pooled_call(executor or default_executor(), fn, for_worker(args), kwargs, hint=hint(args))
        except NotShippable as why:
            log.warning("tool %s runs in the host (no timeout, no limits): %s", getattr(fn, "__name__", fn), why)
            return fn(*args, **kwargs)

    return in_pool_sync


_default: Executor | None = None
_default_lock = threading.Lock()


def default_executor() -> Executor:
    """The process's shared Executor for tools given none: created on first use (``mode="auto"``,
    ``TOOLFORK_MODE`` applies), closed at exit."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Executor([run_callable])
            atexit.register(_default.close)
        return _default


__all__ = [
    "RUNNER",
    "NotShippable",
    "PoolCallFailed",
    "SandboxRefused",
    "SandboxedCallError",
    "UnsendableResult",
    "apooled_call",
    "default_executor",
    "pooled_call",
    "run_callable",
]
