"""The Ray backend, worker side: the task body that runs one call, and the actor that carries messages.

``run_call`` is the body of the Ray task submitted for each call. It runs in a Ray worker process (on
any node of the cluster) and calls ``execute_call``, so the hook rules are the ones every backend
shares. Ray resolves only top-level ``ObjectRef`` arguments, so the tool and the hooks arrive wrapped in
a tuple, unresolved: the worker fetches and unpickles them once per (executor, tool) and keeps them.
Without that cache every call would unpickle its tool again and rebuild its pydantic validators.

``Sink`` is a small async actor: workers ``put`` messages into their executor's channel, the host keeps
one ``take`` pending and includes it in its ``ray.wait``, so a message wakes the host at once instead of
being polled for. It also owns the rate limits where the calls start: the driver admits a rate-limited
call's task at the tool's rate, but Ray may hold tasks admitted apart (a worker process still
starting) and start them together; so the task of a rate-limited tool first takes a token from the
sink (``token``: one token bucket per executor and tool, on the actor's clock, which waits until the
token is due), then reports its start and runs the tool. Messages (tagged with the host's per-dispatch
token, not the call id: a retried call reuses its id)::

    ("s", token, wall_time, pid)     the call started (sent only when it has a deadline)
    ("p", token, seq, value)         ToolRuntime.emit_progress(value); an async actor may run two puts
                                     out of order, so the host puts them back in ``seq`` order

The task returns ``(ToolResult, number of progress messages)``; before returning it waits until the
actor has taken its messages, so the host, which drains the sink until it has seen that many, always
yields a call's progress events before its result.

The tool's ceiling (``max_result_mb``, ``wire.ceiling``) bounds the pickled size of its result and of
each progress value, here in the worker, before Ray hands them to the host (which unpickles what Ray
gives it: there is no data-only decoding to count in; a Ray worker runs no sandboxed call, its code is
trusted as the host's is): past it the call fails with ``ResultTooLarge``.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import time
from typing import TYPE_CHECKING, Any

import ray

from toolfork.executor import tracing
from toolfork.executor.backends.base import WorkerSetup
from toolfork.executor.invoke import error_info, execute_call
from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire import ceiling
from toolfork.executor.wire.callitem import CallItem
from toolfork.governance.ratelimit import RateLimit, TokenBucket
from toolfork.tools.runtime import ToolRuntime

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool

FLUSH_TIMEOUT_S = 10.0  # how long a finished call waits for the sink to take its progress messages
CACHE_LIMIT = 512  # (executor, tool) entries a long-lived Ray worker keeps
INTERRUPTED_EXIT = 75  # exit status of a worker whose call was interrupted at its deadline

# Per Ray worker process: what earlier calls of the same executor already loaded or ran.
_TOOLS: dict[tuple[str, str], Tool] = {}
_HOOKS: dict[str, WorkerSetup] = {}
_STARTED: dict[str, ErrorInfo | None] = {}  # executor id -> the on_worker_start error, if it failed


class Sink:
    """Messages from running calls to the host (an async Ray actor; see the module docstring).

    One per driver process, shared by its executors: each reads its own channel (its executor id), so
    the ~0.7 s start of an actor process is paid once, not per executor.
    """

    CLOSED_LIMIT = 4096

    def __init__(self) -> None:
        self._messages: dict[str, list[tuple[Any, ...]]] = {}
        self._ready: dict[str, asyncio.Event] = {}
        self._closed: dict[str, None] = {}  # channels whose executor closed: late messages are dropped
        self._buckets: dict[tuple[str, str], TokenBucket] = {}  # (channel, tool) -> its rate limit

    def _event(self, channel: str) -> asyncio.Event:
        event = self._ready.get(channel)
        if event is None:
            event = self._ready[channel] = asyncio.Event()
        return event

    async def ping(self) -> bool:
        return True

    async def token(self, channel: str, tool: str, per_second: float, burst: int) -> None:
        """Return when the next start of ``tool`` (of the executor of ``channel``) is due by its rate."""
        key = (channel, tool)
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self.CLOSED_LIMIT:
                del self._buckets[next(iter(self._buckets))]
            bucket = self._buckets[key] = TokenBucket(RateLimit(per_second, burst))
        wait = bucket.reserve(time.monotonic()) - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    async def put(self, channel: str, message: tuple[Any, ...]) -> None:
        if channel in self._closed:
            return
        self._messages.setdefault(channel, []).append(message)
        self._event(channel).set()

    async def take(self, channel: str) -> list[tuple[Any, ...]]:
        """Every message of ``channel`` so far; waits until there is at least one (or it is closed)."""
        event = self._event(channel)
        await event.wait()
        event.clear()
        return self._messages.pop(channel, [])

    async def close(self, channel: str) -> None:
        self._messages.pop(channel, None)
        for key in [key for key in self._buckets if key[0] == channel]:
            del self._buckets[key]
        event = self._ready.pop(channel, None)
        if event is not None:
            event.set()  # a pending take returns []
        if len(self._closed) >= self.CLOSED_LIMIT:
            del self._closed[next(iter(self._closed))]
        self._closed[channel] = None


class RayRuntime(ToolRuntime):
    """Progress goes to the sink actor at once, so the host sees it while the call still runs."""

    __slots__ = ("_ceiling", "_channel", "_refs", "_sink", "_token", "too_large")

    def __init__(self, sink: Any, channel: str, token: int, call_id: str, tool_name: str,
                 deadline: float | None, context: dict[str, Any] | None, meta: dict[str, str] | None = None,
                 most: int = ceiling.DEFAULT) -> None:
        super().__init__(call_id, tool_name, deadline, context, meta)
        self._sink = sink
        self._channel = channel
        self._token = token
        self._refs: list[Any] = []
        self._ceiling = most
        self.too_large: ceiling.TooLarge | None = None  # a progress value past the ceiling: the call fails

    def deliver_progress(self, value: Any) -> None:
        size = _pickled_size(value)
        if size is not None and size > self._ceiling:
            self.too_large = ceiling.TooLarge(f"a progress value of {size / ceiling.MB:.0f} MB", self._ceiling)
            raise self.too_large
        try:
            ref = self._sink.put.remote(self._channel, ("p", self._token, len(self._refs), value))
        except Exception as exc:
            raise TypeError(f"progress value of type {type(value).__name__} cannot be sent to the host: "
                            f"{exc}") from None
        self._refs.append(ref)

    def flush(self) -> int:
        """Wait until the sink holds every progress message; returns how many were sent."""
        if self._refs:
            try:
                ray.wait(self._refs, num_returns=len(self._refs), timeout=FLUSH_TIMEOUT_S)
            except Exception:  # the sink is gone (executor closing): the host no longer listens
                pass
        return len(self._refs)


def run_call(
    executor_id: str,
    tool_box: tuple[str, Any],
    hooks_box: tuple[Any] | None,
    token: int,
    item: CallItem,
    sink: Any,
    rate: tuple[float, int] | None = None,
) -> tuple[ToolResult, int, list[Any]]:
    """The body of the Ray task for one call; never raises for a tool's failure. ``rate``: the tool's
    (calls per second, burst), whose token the task takes from the sink before anything else. Returns
    the result, the number of progress messages sent, and (a traced call) its tool's spans as data."""
    pid = os.getpid()
    call_id, _name, arguments, timeout, context, meta, trace = item
    if rate is not None and sink is not None:
        ray.get(sink.token.remote(executor_id, tool_box[0], rate[0], rate[1]))
    if timeout is not None and sink is not None:
        sink.put.remote(executor_id, ("s", token, time.time(), pid))
    name, tool_ref = tool_box
    try:
        tool = _load_tool(executor_id, name, tool_ref)
        hooks = _load_hooks(executor_id, hooks_box)
    except Exception as exc:
        return ToolResult(call_id, name, "error", worker_pid=pid, error=error_info(
            exc, prefix=f"tool '{name}' could not be loaded on the Ray worker (are the modules that define "
                        "it and its hooks installed on every node?)")), 0, []
    start_error = _worker_started(executor_id, hooks)
    if start_error is not None:
        return ToolResult(call_id, name, "error", error=start_error, worker_pid=pid), 0, []
    runtime: ToolRuntime | None = None
    if tool.uses_runtime:
        deadline = None if timeout is None else time.monotonic() + timeout
        runtime = (ToolRuntime(call_id, name, deadline, context, meta) if sink is None  # the host lost its sink
                   else RayRuntime(sink, executor_id, token, call_id, name, deadline, context, meta,
                                   ceiling.of(tool.max_result_mb)))
    spans: list[Any] = []
    try:
        if trace is None:
            result = execute_call(tool, call_id, arguments, runtime, hooks.before_child, hooks.after_child, pid)
        else:  # the tool's spans go under its call's, collected here and returned with the result
            result, spans = tracing.run_traced(trace, lambda: execute_call(
                tool, call_id, arguments, runtime, hooks.before_child, hooks.after_child, pid))
    except SystemExit as exc:  # the tool asked the process to exit: that call crashed, the worker stays
        result = ToolResult(call_id, name, "crashed", worker_pid=pid, error=ErrorInfo(
            "WorkerCrashed", f"tool '{name}' crashed: it called sys.exit({exc.code!r})"))
    except KeyboardInterrupt:
        # ray.cancel(force=False) at the deadline: the tool's finally blocks and after_child have run.
        # Leave as a fork worker stopped by SIGTERM does: Ray kills the processes the tool started
        # with this worker and starts a fresh one, so nothing of the interrupted call lingers.
        os._exit(INTERRUPTED_EXIT)
    sent = runtime.flush() if isinstance(runtime, RayRuntime) else 0
    too_large = runtime.too_large if isinstance(runtime, RayRuntime) else None
    if too_large is None:
        most = ceiling.of(tool.max_result_mb)
        size = _pickled_size(result)
        if size is not None and size > most:
            too_large = ceiling.TooLarge(f"a result of {size / ceiling.MB:.0f} MB", most)
    if too_large is not None:
        result = ToolResult(call_id, name, "error", duration_s=result.duration_s, worker_pid=pid,
                            error=ErrorInfo(ceiling.ERROR_TYPE, f"tool '{name}': {too_large}"))
    return result, sent, spans


def _pickled_size(value: Any) -> int | None:
    """Bytes ``value`` pickles into (what Ray sends the host), or None if it cannot be pickled (Ray's own
    error then says so)."""
    try:
        return len(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    except Exception:
        return None


def _load_tool(executor_id: str, name: str, ref: Any) -> Tool:
    key = (executor_id, name)
    tool = _TOOLS.get(key)
    if tool is None:
        tool = ray.get(ref)
        _remember(_TOOLS, key, tool)
    return tool


def _load_hooks(executor_id: str, hooks_box: tuple[Any] | None) -> WorkerSetup:
    if hooks_box is None:
        return _NO_HOOKS
    hooks = _HOOKS.get(executor_id)
    if hooks is None:
        hooks = ray.get(hooks_box[0])
        _remember(_HOOKS, executor_id, hooks)
    return hooks


def _worker_started(executor_id: str, hooks: WorkerSetup) -> ErrorInfo | None:
    """Run ``on_worker_start`` the first time this executor's calls reach this worker process.

    A worker whose start hook failed fails every call of that executor, naming the hook, as a fork
    worker does: running the hook again for each call would hide the problem behind retries.
    """
    if executor_id in _STARTED:
        return _STARTED[executor_id]
    error = hooks.start_worker()
    _remember(_STARTED, executor_id, error)
    return error


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Insert, dropping the oldest entry (executors long closed) once the cache is full."""
    if len(cache) >= CACHE_LIMIT:
        del cache[next(iter(cache))]
    cache[key] = value


_NO_HOOKS = WorkerSetup()

__all__ = ["RayRuntime", "Sink", "run_call"]
