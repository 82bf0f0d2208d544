"""``Executor``: the front door. Everything that does not depend on where a call runs happens here.

``Executor.run(calls)`` → ``stream(calls)`` → for each call, in order:
  unknown tool        → an error result at once, naming the known tools (nothing is dispatched);
  ``inline`` tool     → run here, in the host, never killed;
  anything else       → a ``Dispatch`` (tool resolved, effective timeout = call's, else tool's, else the
                        executor's) handed to the backend (fork pool | sequential | ray), which yields
                        events in completion order.
``run`` puts the ``CallFinished`` results back in call order; the context updates the calls asked for
are merged into ``Executor.context`` in call order too, so the last call wins whatever finished last.
A tool that declares ``retries`` gets that many more attempts for calls that crashed, timed out or raised.
``imap`` is the same path for batch jobs: the backend pulls calls lazily within a window.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from toolfork.executor.backends.base import WAIT, Backend, Dispatch, Feed, Hooks, Wait
from toolfork.executor.backends.sequential import SequentialBackend, run_in_host
from toolfork.executor.modes import resolve_mode
from toolfork.executor.types import (
    CallFinished,
    CallProgress,
    CallStarted,
    ErrorInfo,
    Event,
    ToolCall,
    ToolResult,
)

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool

RETRYABLE = frozenset({"crashed", "timeout", "error"})


def default_workers() -> int:
    """Enough workers that a typical batch of I/O-bound calls runs at once, bounded for small hosts."""
    return max(4, min(32, (os.cpu_count() or 1) * 4))


class Executor:
    """Runs batches of tool calls: in parallel in forked workers, or sequentially where fork is not
    possible. See ``docs/executor.md`` for the contract."""

    def __init__(
        self,
        tools: Iterable[Any] = (),
        *,
        mode: str = "auto",
        workers: int | None = None,
        timeout: float | None = None,
        before_child: Callable[[], Any] | None = None,
        after_child: Callable[[], Any] | None = None,
        on_worker_start: Callable[[], Any] | None = None,
        kill_grace: float = 1.0,
        address: str | None = None,
        ray_options: dict[str, Any] | None = None,
    ) -> None:
        from toolfork.tools.registry import collect_tools

        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive or None, got {timeout}")
        if kill_grace < 0:
            raise ValueError(f"kill_grace must be >= 0, got {kill_grace}")
        self._tools: dict[str, Tool] = collect_tools(tools)
        self._timeout = timeout
        self._lock = threading.RLock()
        self._closed = False
        self.context: dict[str, Any] = {}
        self._feed: Feed | None = None  # the running batch's, for cancel()
        self._mode, self._fallback_reason = resolve_mode(mode)
        hooks = Hooks(before_child, after_child, on_worker_start)
        self.workers = workers if workers is not None else default_workers()
        self._backend: Backend
        if self._mode == "fork":
            from toolfork.executor.backends.fork_pool import ForkBackend

            self._backend = ForkBackend(self._tools, self.workers, hooks, kill_grace)
        elif self._mode == "ray":
            from toolfork.executor.backends.ray import RayBackend

            self._backend = RayBackend(self._tools, self.workers, hooks, kill_grace, address=address,
                                       options=ray_options)
        else:
            self._backend = SequentialBackend()
        _LIVE.add(self)

    # ----------------------------------------------------------------- properties

    @property
    def mode(self) -> str:
        """The effective mode: "fork", "sequential" or "ray" (never "auto")."""
        return self._mode

    @property
    def fallback_reason(self) -> str | None:
        """Why "auto" runs sequentially (None when it did not fall back)."""
        return self._fallback_reason

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self._tools)

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def closed(self) -> bool:
        return self._closed

    def add_tools(self, *tools: Any) -> None:
        """Register more tools; the fork pool ships them to its workers (serialized with dill)."""
        from toolfork.tools.registry import collect_tools

        new = collect_tools([*self._tools.values(), *tools])
        added = [t for name, t in new.items() if name not in self._tools]
        with self._lock:
            self._check_open()
            if added:
                self._backend.add_tools(added)
            self._tools = new

    # ----------------------------------------------------------------- running

    def run(self, calls: Iterable[ToolCall | dict[str, Any]]) -> list[ToolResult]:
        """One result per call, in call order. Tool failures become results; misuse raises."""
        batch = self._prepare(calls)
        position = {c.id: i for i, c in enumerate(batch)}
        results: list[ToolResult | None] = [None] * len(batch)
        for event in self._events(batch, None, len(batch)):
            if type(event) is CallFinished:
                results[position[event.call_id]] = event.result
        self._merge_context(results)
        return results  # type: ignore[return-value]  # every slot is filled: one CallFinished per call

    def stream(self, calls: Iterable[ToolCall | dict[str, Any]]) -> Iterator[Event]:
        """``CallStarted`` / ``CallProgress`` / ``CallFinished`` events as they happen."""
        batch = self._prepare(calls)

        def events() -> Iterator[Event]:
            finished: dict[str, ToolResult] = {}
            for event in self._events(batch, None, len(batch)):
                if type(event) is CallFinished:
                    finished[event.call_id] = event.result
                yield event
            self._merge_context([finished.get(c.id) for c in batch])

        return events()

    def imap(self, calls: Iterable[ToolCall | dict[str, Any] | Wait], window: int | None = None,
             wakeup_fd: int | None = None) -> Iterator[ToolResult]:
        """Results in call order, pulling ``calls`` lazily: at most ``window`` calls (default 4 x
        workers) are running or waiting for an earlier one, so a million-call job runs in bounded
        memory. Duplicate ids are refused among the calls in that window.

        A live source (a co-process reading its stdin) may yield ``WAIT`` when it has no call yet; the
        calls in flight keep running, and the source is asked again once ``wakeup_fd`` (a pipe the
        source writes a byte to when it has more; the executor drains it) is readable.
        """
        return self._windowed(calls, window, wakeup_fd, ordered=True)

    def imap_unordered(self, calls: Iterable[ToolCall | dict[str, Any] | Wait], window: int | None = None,
                       wakeup_fd: int | None = None) -> Iterator[ToolResult]:
        """``imap`` in completion order: a quick call is never held behind a slow one sent before it."""
        return self._windowed(calls, window, wakeup_fd, ordered=False)

    def _windowed(self, calls: Iterable[ToolCall | dict[str, Any] | Wait], window: int | None,
                  wakeup_fd: int | None, *, ordered: bool) -> Iterator[ToolResult]:
        self._check_open()
        limit = window if window is not None else 4 * max(1, self.workers)
        if limit < 1:
            raise ValueError(f"window must be at least 1, got {limit}")
        seq_of: dict[str, int] = {}  # call id -> position, for the calls in the window
        counts = [0, 0]  # pulled, yielded

        def prepared() -> Iterator[ToolCall | Wait]:
            for c in calls:
                if c is WAIT:
                    yield WAIT
                    continue
                call = c if isinstance(c, ToolCall) else _call_from_dict(c)  # type: ignore[arg-type]
                if call.id in seq_of:
                    raise ValueError(f"duplicate call id {call.id!r} among the calls in flight")
                seq_of[call.id] = counts[0]
                counts[0] += 1
                yield call

        def room() -> bool:
            return counts[0] - counts[1] < limit

        buffer: dict[int, ToolResult] = {}
        for event in self._events(prepared(), room, None, wakeup_fd):
            if type(event) is not CallFinished:
                continue
            result = event.result
            seq = seq_of.pop(event.call_id)
            if not ordered:
                counts[1] += 1
                if result.context_updates:
                    self.context.update(result.context_updates)
                yield result
                continue
            buffer[seq] = result
            while counts[1] in buffer:
                result = buffer.pop(counts[1])
                counts[1] += 1
                if result.context_updates:
                    self.context.update(result.context_updates)
                yield result

    async def arun(self, calls: Iterable[ToolCall | dict[str, Any]]) -> list[ToolResult]:
        """``run`` for asyncio hosts: the batch runs in a thread so the event loop stays free."""
        batch = list(calls)
        return await asyncio.to_thread(self.run, batch)

    async def astream(self, calls: Iterable[ToolCall | dict[str, Any]]) -> AsyncIterator[Event]:
        """``stream`` for asyncio hosts: the batch runs in a thread and its events are handed to the
        event loop as they happen. Leaving the ``async for`` early cancels what is still running."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue()
        events = self.stream(calls)

        def pump() -> None:
            try:
                for event in events:
                    loop.call_soon_threadsafe(queue.put_nowait, event)
            except BaseException as exc:  # handed to the consumer, re-raised there
                loop.call_soon_threadsafe(queue.put_nowait, exc)
            else:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        worker = loop.run_in_executor(None, pump)
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not worker.done():
                self.cancel()
            await asyncio.shield(worker)

    def _prepare(self, calls: Iterable[ToolCall | dict[str, Any]]) -> list[ToolCall]:
        self._check_open()
        batch: list[ToolCall] = []
        seen: set[str] = set()
        for c in calls:
            call = c if isinstance(c, ToolCall) else _call_from_dict(c)
            if call.id in seen:
                raise ValueError(f"duplicate call id {call.id!r} in one batch: ids must be unique")
            seen.add(call.id)
            batch.append(call)
        return batch

    def _events(self, calls: Iterable[ToolCall | Wait], room: Callable[[], bool] | None,
                size: int | None, wakeup_fd: int | None = None) -> Iterator[Event]:
        """Feed the calls to the backend; retry what a tool's ``retries`` allows."""
        with self._lock:
            self._check_open()
            retriable: dict[str, Dispatch] = {}  # calls of tools that declare retries, until they finish
            feed = Feed(self._dispatches(calls, retriable), room, size, wakeup_fd)
            self._feed = feed
            attempts: dict[str, int] = {}
            try:
                for event in self._backend.execute(feed):
                    if type(event) is CallFinished:
                        result = event.result
                        if result.status in RETRYABLE and not feed.cancelled and not _is_input_error(result):
                            tool = self._tools.get(result.name)
                            n = attempts.get(result.call_id, 0)
                            if tool is not None and n < tool.retries and not tool.inline:
                                attempts[result.call_id] = n + 1
                                feed.retry(retriable[result.call_id])
                                continue
                        attempts.pop(result.call_id, None)
                        retriable.pop(result.call_id, None)
                    yield event
            finally:
                self._feed = None

    def _dispatches(self, calls: Iterable[ToolCall | Wait],
                    retriable: dict[str, Dispatch]) -> Iterator[Dispatch | list[Event] | Wait]:
        """What the backend pulls: a Dispatch per call, or ready events for unknown and inline tools."""
        context = dict(self.context) if self.context else {}
        tools = self._tools
        default_timeout = self._timeout
        for call in calls:
            if call is WAIT:
                yield WAIT
                continue
            assert isinstance(call, ToolCall)
            tool = tools.get(call.name)
            if tool is None:  # a call's ready events go as one list: the window counts the call once
                yield [CallStarted(call.id, call.name), CallFinished(call.id, self._unknown_tool(call))]
                continue
            timeout = call.timeout if call.timeout is not None else tool.timeout
            d = Dispatch(call, tool, default_timeout if timeout is None else timeout, context)
            if tool.inline:
                progress: list[Any] = []
                result = run_in_host(d, lambda _cid, value, sink=progress: sink.append(value))
                yield [CallStarted(call.id, call.name), *(CallProgress(call.id, v) for v in progress),
                       CallFinished(call.id, result)]
                continue
            if tool.retries:
                retriable[call.id] = d
            yield d

    def _merge_context(self, results: Iterable[ToolResult | None]) -> None:
        """Context updates merge in call order: the last call wins, whatever finished last."""
        for r in results:
            if r is not None and r.context_updates:
                self.context.update(r.context_updates)

    def cancel(self) -> None:
        """Stop the batch that is running (call it from another thread, a signal handler or a
        callback): running calls are stopped as on a timeout and, like the calls not started yet,
        come back "cancelled"; ``run`` then returns normally. No-op when no batch runs."""
        feed = self._feed
        if feed is not None:
            feed.cancel()
            self._backend.wake()

    def _unknown_tool(self, call: ToolCall) -> ToolResult:
        known = ", ".join(sorted(self._tools)) or "(none)"
        return ToolResult(call.id, call.name, "error", error=ErrorInfo(
            "UnknownToolError", f"unknown tool {call.name!r}; the available tools are: {known}"))

    # ----------------------------------------------------------------- lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Executor is closed; create a new one")

    def close(self) -> None:
        """End every worker (no zombie, no orphan). Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._backend.close()
            _LIVE.discard(self)

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._tools)} tools"
        return f"<Executor mode={self._mode} workers={self.workers} {state}>"


def _call_from_dict(data: dict[str, Any]) -> ToolCall:
    try:
        return ToolCall(id=str(data["id"]), name=str(data["name"]), arguments=dict(data.get("arguments") or {}),
                        timeout=data.get("timeout"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a call must be a ToolCall or a dict with 'id', 'name', 'arguments': {exc}") from None


def _is_input_error(result: ToolResult) -> bool:
    return result.error is not None and result.error.type == "ToolInputError"


_LIVE: weakref.WeakSet[Executor] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """An executor the program forgot to close still leaves no process behind at exit."""
    for ex in list(_LIVE):
        try:
            ex.close()
        except Exception:
            pass


__all__ = ["Executor", "default_workers"]
