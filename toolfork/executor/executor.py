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
``imap`` is the same path for jobs: the backend pulls calls lazily within a window.
With ``journal=Journal(path)`` (``journal.py``) a call's start is written before its Dispatch is handed
to the backend and its result when it finishes, so running the batch again resumes it without guessing.

Any number of batches run at once on one Executor (threads, asyncio tasks, a batch started while
another is iterated): nothing here is locked for a batch's length; the backend shares its workers
between the live batches (see ``backends/base.py``, ``Hub``). ``submit(call)`` puts single calls into
one long-lived batch fed by a queue and driven by a thread of its own (``singles.py``), whose results
resolve ``concurrent.futures.Future`` objects; ``acall`` awaits one of those.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import secrets
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from toolfork.executor import metering, tracing
from toolfork.executor.backends import choose
from toolfork.executor.backends.base import Backend, WorkerSetup
from toolfork.executor.backends.dispatch import WAIT, Dispatch, Wait
from toolfork.executor.backends.hub import Feed
from toolfork.executor.backends.sequential import SequentialBackend
from toolfork.executor.calls import CallBook
from toolfork.executor.closable import Closable
from toolfork.executor.inline import InlineCalls
from toolfork.executor.journal import Journal
from toolfork.executor.modes import resolve_mode
from toolfork.executor.singles import CallFuture, Singles, SinglesHost
from toolfork.executor.stats import CallTally, ExecutorStats, frozen
from toolfork.executor.types import (
    CallFinished,
    CallStarted,
    Event,
    ToolCall,
    ToolResult,
)
from toolfork.tools.runtime import JOB_CONTEXT_KEY

if TYPE_CHECKING:
    import asyncio

    from toolfork.executor.backends.capabilities import Capabilities
    from toolfork.executor.sessions.session import Session
    from toolfork.governance.limits import Limits
    from toolfork.tools.tool import Tool

RETRYABLE = frozenset({"crashed", "timeout", "error"})
SESSIONS_PER_WORKER = 8  # sessions open at once, by default: workers x this (see docs/sessions.md)
T = TypeVar("T")


def default_workers() -> int:
    """Enough workers that a typical batch of I/O-bound calls runs at once, bounded for small hosts."""
    return max(4, min(32, (os.cpu_count() or 1) * 4))


class Batch(Generic[T]):
    """A batch that is running (what ``stream``, ``imap`` and ``imap_unordered`` return): iterate it for
    its events or results; ``cancel()`` stops this batch alone, from any thread, like
    ``Executor.cancel(batch)``. Leaving the iteration early (``close()``, ``break``) stops what of it
    still runs."""

    __slots__ = ("_cancelled", "_executor", "_feed", "_iterator")

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._feed: Feed | None = None
        self._cancelled = False
        self._iterator: Iterator[T] = iter(())

    def __iter__(self) -> Batch[T]:
        return self

    def __next__(self) -> T:
        return next(self._iterator)

    def cancel(self) -> None:
        """Running calls are stopped as on a timeout; they and the calls not started come back
        "cancelled", and iteration ends normally. Other batches are not touched."""
        self._cancelled = True
        feed = self._feed
        if feed is not None:
            self._executor._cancel_feed(feed)

    def close(self) -> None:
        close = getattr(self._iterator, "close", None)
        if close is not None:
            close()

    def _started(self, feed: Feed) -> None:
        self._feed = feed
        if self._cancelled:
            feed.cancel()


class Executor(Closable):
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
        encode_results: Callable[[ToolResult], bytes | None] | None = None,
        limits: Limits | None = None,
        concurrency: Mapping[str, int] | None = None,
        max_calls_per_worker: int | None = None,
        max_worker_memory_mb: int | None = None,
        max_sessions: int | None = None,
    ) -> None:
        from toolfork.governance.policy import Governance
        from toolfork.tools.registry import collect_tools

        if timeout is not None and not timeout > 0:  # NaN included
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout}")
        if timeout == math.inf:
            timeout = None  # no limit, said another way
        if kill_grace < 0:
            raise ValueError(f"kill_grace must be >= 0, got {kill_grace}")
        if max_sessions is not None and (type(max_sessions) is not int or max_sessions < 1):
            raise ValueError(f"max_sessions must be a positive int or None (workers x 8), got {max_sessions!r}")
        self._tools: dict[str, Tool] = collect_tools(tools)
        self._timeout = timeout
        self._lock = threading.Lock()  # guards _feeds, _singles and closing; never held for a batch
        self._closed = False
        self._pid = os.getpid()  # an Executor with processes does not cross a fork (see _check_open)
        self.context: dict[str, Any] = {}
        # The job key of calls run without a journal (``ToolRuntime.idempotency_key``): this Executor's,
        # or the one a program sets (``toolfork run``: its journal's, so session and single calls keep theirs).
        self.job_key = secrets.token_hex(16)
        self._feeds: set[Feed] = set()  # the batches running now, for cancel() and close()
        self._tally = CallTally()  # finished calls by (tool, status), for stats() (under _lock)
        self._singles: Singles | None = None  # submit()'s batch, started on first use
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()  # open sessions, closed with us
        self.kill_grace = kill_grace
        self._mode, self._fallback_reason = resolve_mode(mode)
        # Limits, caps, rate limits and recycling: checked before any process starts (fail closed), from
        # what the backend the mode names can do.
        backend_class = choose.backend_class(self._mode)
        self.governance = Governance(backend_class.capabilities, limits=limits,
                                     concurrency=concurrency, max_calls_per_worker=max_calls_per_worker,
                                     max_worker_memory_mb=max_worker_memory_mb)
        self.governance.register(self._tools.values())
        hooks = WorkerSetup(before_child, after_child, on_worker_start, encode_results, self.governance.default)
        self.workers = workers if workers is not None else default_workers()
        self.max_sessions = max_sessions if max_sessions is not None else SESSIONS_PER_WORKER * max(1, self.workers)
        self._backend: Backend
        if backend_class is SequentialBackend:
            self._backend = SequentialBackend(self.governance)
        else:
            where = {"address": address, "options": ray_options} if self._mode == "ray" else {}
            self._backend = backend_class(self._tools, self.workers, hooks, kill_grace,  # type: ignore[call-arg]
                                          governance=self.governance, **where)
        _LIVE.add(self)
        metering.track(self)

    # ----------------------------------------------------------------- properties

    @property
    def mode(self) -> str:
        """The effective mode: "fork", "sequential" or "ray" (never "auto")."""
        return self._mode

    @property
    def capabilities(self) -> Capabilities:
        """What its backend can do (see ``backends.capabilities``): what decisions about it read."""
        return self._backend.capabilities

    @property
    def fallback_reason(self) -> str | None:
        """Why "auto" runs sequentially (None when it did not fall back)."""
        return self._fallback_reason

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self._tools)

    @property
    def timeout(self) -> float | None:
        """The executor's own timeout: what a call gets when neither it nor its tool sets one."""
        return self._timeout

    @property
    def backend(self) -> Backend:
        return self._backend

    def stats(self) -> ExecutorStats:
        """What the executor has done and is doing now, as one snapshot (any thread; never waits for a
        batch). See ``ExecutorStats`` for each field."""
        load = self._backend.load()
        with self._lock:
            calls = self._tally.snapshot()
        return ExecutorStats(self._mode, load.workers, load.busy, load.idle, load.queued, frozen(calls),
                             frozen(load.restarts), load.template_restarts)

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
                self.governance.register(added)
                self._backend.add_tools(added)
            self._tools = new

    # ----------------------------------------------------------------- running

    def run(self, calls: Iterable[ToolCall | dict[str, Any]], *, journal: Journal | None = None) -> list[ToolResult]:
        """One result per call, in call order. Tool failures become results; misuse raises.
        ``journal``: record starts and results there, and resume what it holds (see ``Journal``)."""
        return self._run(self._prepare(calls), None, journal, tracing.capture())

    def _run(self, batch: list[ToolCall], handle: Batch[Any] | None,
             journal: Journal | None = None, parent: Any = None) -> list[ToolResult]:
        position = {c.id: i for i, c in enumerate(batch)}
        results: list[ToolResult | None] = [None] * len(batch)
        for event in self._events(batch, None, on_feed=None if handle is None else handle._started,
                                  journal=journal, parent=parent, starts=False):
            if type(event) is CallFinished:
                results[position[event.call_id]] = event.result
        self.merge_context(results)
        return results  # type: ignore[return-value]  # every slot is filled: one CallFinished per call

    def stream(self, calls: Iterable[ToolCall | dict[str, Any]], *, journal: Journal | None = None) -> Batch[Event]:
        """``CallStarted`` / ``CallProgress`` / ``CallFinished`` events as they happen (``journal``: as
        in ``run``)."""
        batch = self._prepare(calls)
        handle: Batch[Event] = Batch(self)
        parent = tracing.capture()

        def events() -> Iterator[Event]:
            finished: dict[str, ToolResult] = {}
            for event in self._events(batch, None, on_feed=handle._started, journal=journal, parent=parent):
                if type(event) is CallFinished:
                    finished[event.call_id] = event.result
                yield event
            self.merge_context([finished.get(c.id) for c in batch])

        handle._iterator = events()
        return handle

    def submit(self, call: ToolCall | dict[str, Any], *,
               on_progress: Callable[[Any], Any] | None = None) -> Future[ToolResult]:
        """Run one call; its ``Future`` resolves to its ``ToolResult`` (tool failures included). For
        hosts with one call at a time (an MCP server, a framework that starts each tool call as a task):
        concurrent single calls share the workers like one batch. As a ``concurrent.futures.Future``,
        ``future.cancel()`` cancels a call that has not reached a worker and returns False after that;
        ``ex.cancel(future)`` stops it wherever it is (a running call's worker is killed, as on a
        timeout; its result is "cancelled"). Ids must be unique among the calls submitted and neither finished nor
        cancelled; a call may reuse the id of a cancelled one (it starts once that one has stopped, and
        its future gets its own result).
        ``on_progress(value)`` is called, in the executor's own thread, for each progress report."""
        self._check_open()
        c = call if isinstance(call, ToolCall) else _call_from_dict(call)
        singles = self._singles
        if singles is None:
            with self._lock:
                self._check_open()
                if self._singles is None:
                    self._singles = Singles(SinglesHost(
                        run=lambda source, fd, on_feed, parent_of: self._events(source, None, fd, on_feed=on_feed,
                                                                                 parent=parent_of, starts=True),
                        stop=self._backend.cancel,
                        merge_context=lambda updates: self.context.update(updates),
                        closed=lambda: self._closed, runs_when_pulled=self._backend.capabilities.in_host))
                singles = self._singles
        return singles.submit(c, on_progress, tracing.capture())

    async def acall(self, call: ToolCall | dict[str, Any], *,
                    on_progress: Callable[[Any], Any] | None = None) -> ToolResult:
        """``submit`` for asyncio hosts; cancelling the awaiting task stops the call."""
        import asyncio  # its caller's loop has imported it; a module-level import costs every process 15 ms

        future = self.submit(call, on_progress=on_progress)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self.cancel(future)  # a running call too (the future's own cancel() leaves it running)
            raise

    def imap(self, calls: Iterable[ToolCall | dict[str, Any] | Wait], window: int | None = None,
             wakeup_fd: int | None = None, *, journal: Journal | None = None) -> Batch[ToolResult]:
        """Results in call order, pulling ``calls`` lazily: at most ``window`` calls (default 4 x
        workers) are running or waiting for an earlier one, so a million-call job runs in bounded
        memory. Duplicate ids are refused among the calls in that window.

        A live source (a co-process reading its stdin) may yield ``WAIT`` when it has no call yet; the
        calls in flight keep running, and the source is asked again once ``wakeup_fd`` (a pipe the
        source writes a byte to when it has more; the executor drains it) is readable.
        ``journal``: as in ``run``.
        """
        return self._windowed(calls, window, wakeup_fd, ordered=True, journal=journal)

    def imap_unordered(self, calls: Iterable[ToolCall | dict[str, Any] | Wait], window: int | None = None,
                       wakeup_fd: int | None = None, *, journal: Journal | None = None) -> Batch[ToolResult]:
        """``imap`` in completion order: a quick call is never held behind a slow one sent before it."""
        return self._windowed(calls, window, wakeup_fd, ordered=False, journal=journal)

    def _windowed(self, calls: Iterable[ToolCall | dict[str, Any] | Wait], window: int | None,
                  wakeup_fd: int | None, *, ordered: bool, journal: Journal | None = None) -> Batch[ToolResult]:
        self._check_open()
        limit = window if window is not None else 4 * max(1, self.workers)
        if limit < 1:
            raise ValueError(f"window must be at least 1, got {limit}")
        handle: Batch[ToolResult] = Batch(self)
        handle._iterator = self._windowed_results(calls, limit, wakeup_fd, ordered, handle, journal,
                                                  tracing.capture())
        return handle

    def _windowed_results(self, calls: Iterable[ToolCall | dict[str, Any] | Wait], limit: int,
                          wakeup_fd: int | None, ordered: bool, handle: Batch[ToolResult],
                          journal: Journal | None, parent: Any) -> Iterator[ToolResult]:
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
        for event in self._events(prepared(), room, wakeup_fd, on_feed=handle._started, journal=journal,
                                  parent=parent):
            if type(event) is not CallFinished:
                continue
            result = event.result
            seq = seq_of.pop(event.call_id)
            if not ordered:
                counts[1] += 1
                self.merge_context((result,))
                yield result
                continue
            buffer[seq] = result
            while counts[1] in buffer:
                result = buffer.pop(counts[1])
                counts[1] += 1
                self.merge_context((result,))
                yield result

    async def arun(self, calls: Iterable[ToolCall | dict[str, Any]]) -> list[ToolResult]:
        """``run`` for asyncio hosts: the batch runs in a thread of its own (not the loop's default
        executor, whose few threads would make concurrent batches queue), so the event loop stays free.
        Cancelling the awaiting task cancels this batch alone, and returns once it has stopped."""
        import asyncio

        batch = self._prepare(calls)
        handle: Batch[Any] = Batch(self)
        parent = tracing.capture()
        done = _in_thread(asyncio.get_running_loop(), lambda: self._run(batch, handle, None, parent), "toolfork-arun")
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            handle.cancel()
            with contextlib.suppress(BaseException):
                await done
            raise

    async def astream(self, calls: Iterable[ToolCall | dict[str, Any]]) -> AsyncIterator[Event]:
        """``stream`` for asyncio hosts: the batch runs in a thread of its own and its events are handed
        to the event loop as they happen. Leaving the ``async for`` early cancels this batch alone."""
        import asyncio

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

        done = _in_thread(loop, pump, "toolfork-astream")
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not done.done():
                events.cancel()
            await asyncio.shield(done)

    def session(self, factory: Callable[..., Any], *args: Any, checkpoint: bool | str = False,
                limits: Limits | None = None, host_tools: Iterable[str] = (), **kwargs: Any) -> Session:
        """A state built by ``factory(*args, **kwargs)`` where the session's calls run; ``with`` it, and
        ``run`` its calls on it in order (tools reach it as ``runtime.state``). ``limits`` (asking for the
        sandbox): the session's process enters that sandbox when it opens, before the factory runs.
        ``host_tools``: this Executor's tools the session's calls may ask the host to run in its pool
        (``runtime.call_host(name, **arguments)``; fork mode). See ``docs/sessions.md``."""
        from toolfork.executor.sessions.session import open_session

        self._check_open()
        s = open_session(self, self._prepare, factory, args, kwargs, checkpoint, limits, host_tools)
        with self._lock:
            if self._closed:
                s.close()
                self._check_open()
            self._sessions.add(s)
        return s

    def session_ahead(self, factory: Callable[..., Any], *args: Any, checkpoint: bool | str = False,
                      limits: Limits | None = None, on_discard: Callable[[], None] | None = None,
                      **kwargs: Any) -> bool:
        """Open, in the background, the session ``session(factory, *args, checkpoint=..., limits=...,
        **kwargs)`` would open, so that the next such call (all its arguments equal) returns at once. One is
        kept, for the arguments given last; ``on_discard`` is called once if it is let go unused. False when
        this backend does not (fork does)."""
        from toolfork.executor.sessions.session import prepare_session

        self._check_open()
        return prepare_session(self, factory, args, kwargs, checkpoint, limits, on_discard)

    @contextlib.contextmanager
    def counted(self) -> Iterator[dict[tuple[str, str], int]]:
        """A batch's own counts of finished calls by (tool, status), in ``stats()`` while it runs and
        after; written by the caller's thread alone (a session's ``run`` counts its calls so)."""
        with self._lock:
            counts = self._tally.open()
        try:
            yield counts
        finally:
            with self._lock:
                self._tally.close(counts)

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
                wakeup_fd: int | None = None, *, on_feed: Callable[[Feed], None] | None = None,
                journal: Journal | None = None, parent: Any = None, starts: bool = True) -> Iterator[Event]:
        """Feed the calls to the backend; retry what a tool's ``retries`` allows. ``on_feed`` gets the
        batch's ``Feed`` once it is known (a ``Batch`` handle, to cancel it). ``journal`` gets each
        call's start before its Dispatch reaches the backend, and its result. ``parent``: the context
        captured where the calls were submitted (``tracing.capture``), or a function of the call that
        gives it (single calls: each its own); None when nothing traces. ``starts``: whether the
        consumer reads ``CallStarted`` (``run`` keeps results alone)."""
        traced = None if parent is None else (parent if callable(parent) else lambda _c: parent, tracing.CallSpans())
        return self._batch_events(calls, room, wakeup_fd, on_feed, journal, traced, starts)

    def _batch_events(self, calls: Iterable[ToolCall | Wait], room: Callable[[], bool] | None,
                      wakeup_fd: int | None, on_feed: Callable[[Feed], None] | None, journal: Journal | None,
                      traced: tuple[Callable[[ToolCall], Any], tracing.CallSpans] | None,
                      starts: bool = True) -> Iterator[Event]:
        retriable: dict[str, Dispatch] = {}  # calls of tools that declare retries, until they finish
        # Inline calls run in this thread as the feed pulls them; a gated one that cannot start yet is
        # parked there, never waited for (see inline.py). Parked calls stop when the batch is cancelled
        # (the source is first pulled by the feed, so ``feed`` is bound by then).
        inline = InlineCalls(self.governance, self._backend.wake)
        book = CallBook(self._timeout, self.dispatch_context(journal), {}, lambda: self._tools, journal=journal,
                        spans=None if traced is None else traced[1], parent_of=None if traced is None else traced[0],
                        recorder=metering.recorder())  # no recorder unless a MeterProvider is configured
        recorder = book.recorder
        source = self._dispatches(calls, book, retriable, inline, room, lambda: feed.cancelled)
        feed = Feed(source, room, wakeup_fd, starts=starts or recorder is not None)  # the recorder counts starts
        inline.feed = feed
        with self._lock:
            self._check_open()
            self._feeds.add(feed)
            counts = book.counts = self._tally.open()  # this batch's own counts: written by this thread alone
        if on_feed is not None:
            on_feed(feed)
        attempts: dict[str, int] = {}
        finish = book.finish
        try:
            for event in self._backend.execute(feed):
                if type(event) is CallFinished:
                    result = event.result
                    if result.status in RETRYABLE and not feed.cancelled and not _is_input_error(result):
                        tool = self._tools.get(result.name)  # now: add_tools() replaces the mapping
                        n = attempts.get(result.call_id, 0)
                        if tool is not None and n < tool.retries and not tool.inline:
                            attempts[result.call_id] = n + 1
                            feed.retry(retriable[result.call_id])
                            continue
                    if retriable:  # a call of a tool that declares retries: it is done now
                        attempts.pop(result.call_id, None)
                        retriable.pop(result.call_id, None)
                    finish(result)
                elif recorder is not None and type(event) is CallStarted:
                    book.started(event.call_id, event.name)
                yield event
        finally:
            if traced is not None:
                book.close()  # the consumer left with calls still open: their spans end "cancelled"
            with self._lock:
                self._feeds.discard(feed)
                self._tally.close(counts)

    def _dispatches(self, calls: Iterable[ToolCall | Wait], book: CallBook, retriable: dict[str, Dispatch],
                    inline: InlineCalls, room: Callable[[], bool] | None, stopped: Callable[[], bool],
                    ) -> Iterator[Dispatch | list[Event] | Wait]:
        """What the backend pulls: a Dispatch per call, or ready events for the calls ``book.admit``
        answers itself (an unknown tool, a bad timeout, the journal's answer) and for inline calls. An
        inline call parked for its cap or rate limit comes out later (``WAIT`` until it has). While
        calls are parked the feed pulls even without ``room``: then only they are looked at."""
        admit = book.admit
        measured = book.recorder is not None
        parked = inline.parked
        for item in calls:
            out: Dispatch | list[Event] | Wait | None
            if item is WAIT:
                out = WAIT
            else:
                call: ToolCall = item  # type: ignore[assignment]  # every source makes ToolCalls of what it takes
                d = admit(call, self._tools.get(call.name))  # looked up now: a long-lived batch sees add_tools()
                if type(d) is not Dispatch:  # a call's ready events go as one list: the window counts it once
                    out = [CallStarted(call.id, call.name), CallFinished(call.id, d)]  # type: ignore[arg-type]
                elif d.tool.inline:
                    out = inline.run(d, stopped())  # None: parked
                else:
                    if d.tool.retries:
                        retriable[call.id] = d
                    if measured:
                        book.pulled(d)
                    out = d
            if out is not None:
                yield out
            if parked:  # before the next call is pulled: parked calls that may start now
                yield from inline.ready(stopped())
                while parked and room is not None and not room():
                    yield WAIT
                    yield from inline.ready(stopped())
        while inline.parked:
            yield from inline.ready(stopped())
            if inline.parked:
                yield WAIT

    def dispatch_context(self, journal: Journal | None = None) -> dict[str, Any]:
        """The context a batch's calls get: ``self.context`` and the job key of their idempotency keys
        (the journal's, else this Executor's)."""
        return {**self.context, JOB_CONTEXT_KEY: journal.job_key if journal is not None else self.job_key}

    def merge_context(self, results: Iterable[ToolResult | None]) -> None:
        """Context updates merge in call order: the last call wins, whatever finished last (a batch's,
        a stream's and a session's results alike)."""
        for r in results:
            if r is not None and r.context_updates:
                self.context.update(r.context_updates)

    def cancel(self, target: Batch[Any] | Future[ToolResult] | None = None) -> None:
        """Stop a batch (what ``stream`` / ``imap`` returned), a future (from ``submit``), or, with no
        argument, every batch and future running now. Running calls are stopped as on a timeout and,
        like the calls not started yet, come back "cancelled"; ``run`` then returns normally. Callable
        from another thread, a signal handler or a callback; a no-op for what has finished."""
        if target is None:
            with self._lock:
                feeds = list(self._feeds)
                singles = self._singles
            for feed in feeds:
                if singles is None or feed is not singles.feed:
                    self._cancel_feed(feed)
            if singles is not None:
                singles.cancel_all()
        elif isinstance(target, CallFuture):
            target.stop()
        elif isinstance(target, (Batch, Future)):
            target.cancel()
        else:
            raise TypeError(f"cancel() takes a Batch, a Future from submit() or nothing, not {type(target).__name__}")

    def _cancel_feed(self, feed: Feed) -> None:
        feed.cancel()
        self._backend.cancel(feed)

    # ----------------------------------------------------------------- lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Executor is closed; create a new one")
        if self._pid != os.getpid() and not self._backend.capabilities.in_host:
            raise RuntimeError(
                f"this Executor (mode {self._mode!r}) was created in process {self._pid} and cannot be used in "
                f"process {os.getpid()}: an Executor does not cross a fork (its workers, pipes and threads belong "
                "to the process that created it). A tool running in a worker, or a forked child, must create "
                "an Executor of its own")

    def close(self) -> None:
        """Cancel every batch and future still running ("cancelled" results), end every worker (no
        zombie, no orphan). Safe to call twice, and from another thread while batches run."""
        if self._pid != os.getpid():  # a forked copy: the workers and pipes are the creator's to end
            self._closed = True
            _LIVE.discard(self)
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            feeds = list(self._feeds)
            singles = self._singles
            sessions = list(self._sessions)
        for s in sessions:
            s.close()
        if singles is not None:
            singles.close()
        for feed in feeds:
            self._cancel_feed(feed)
        self._backend.close()
        if singles is not None:
            singles.join()
        _close_tool_resources(self._tools.values())
        _LIVE.discard(self)
        metering.retire(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._tools)} tools"
        return f"<Executor mode={self._mode} workers={self.workers} {state}>"


def _call_from_dict(data: dict[str, Any]) -> ToolCall:
    try:
        return ToolCall(id=str(data["id"]), name=str(data["name"]), arguments=dict(data.get("arguments") or {}),
                        timeout=data.get("timeout"), meta=data.get("meta"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a call must be a ToolCall or a dict with 'id', 'name', 'arguments': {exc}") from None


def _in_thread(loop: asyncio.AbstractEventLoop, fn: Callable[[], T], name: str) -> asyncio.Future[T]:
    """Run ``fn`` in a new daemon thread; the returned future (of ``loop``) gets its outcome."""
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, exc: BaseException | None) -> None:
        if done.done():
            return
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(result)

    def target() -> None:
        try:
            result, exc = fn(), None
        except BaseException as e:  # handed to the awaiting task
            result, exc = None, e
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody awaits any more
            loop.call_soon_threadsafe(settle, result, exc)

    threading.Thread(target=target, name=name, daemon=True).start()
    return done


def _close_tool_resources(tools: Iterable[Tool]) -> None:
    """A tool whose function holds something in the host (an MCP connector's server process) says so
    with a ``__toolfork_close__`` method: closing the executor releases it."""
    for t in tools:
        close = getattr(t.function, "__toolfork_close__", None)
        if close is not None:
            try:
                close()
            except Exception:  # closing must go on for the other tools
                pass


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


__all__ = ["Batch", "Executor", "default_workers"]
