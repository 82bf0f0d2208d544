"""``Executor.submit``: single calls as ``concurrent.futures.Future`` objects, cheap enough to use one
call at a time.

Hosts such as an MCP server, pydantic-ai or the OpenAI Agents SDK start each tool call on its own. A
batch per call would cost a batch's set-up per call; instead every submitted call joins one long-lived
batch whose source is a queue (a live source: it yields ``WAIT`` when the queue is empty, and a byte
on a pipe says it has more). A thread of ours owns that batch: it pulls the queue, takes part in
driving the backend like any batch owner, and resolves each future as its result comes back. So
1,000 concurrent single calls are chunked and spread over the workers like a batch of 1,000.

A ``CallFuture`` behaves as ``concurrent.futures.Future`` (CPython's own tests of ``Future``, ``wait`` and
``as_completed`` run against it: tests/executor/cpython_futures): it is running from the moment its call
reaches a worker (the backend's ``CallStarted``), so ``cancel()`` cancels a call still queued, here or in
the backend (skipped, or stopped there; waiters counting done futures are notified at once), and returns
False after that; ``Executor.cancel(future)`` stops the call wherever it is (a running call's worker is
killed, as on a timeout; its result is "cancelled"). The
done-callbacks of the futures the owner thread resolves run on ``CallbackThreads``, never on the owner
thread: a callback that blocks, or submits a call and waits for it, holds back no other caller's result.
Context updates merge as results arrive.

Routing: each submission is its own ``ToolCall`` object in the backend (a copy of the caller's), and
stops name that object, never an id. Events come back by call id, so at most one submission per id is
in the backend at a time: a call whose id belongs to a cancelled call still winding down in the backend
waits (parked) until that call's last event has come back, then goes. So a future gets its own call's
result, never that of an earlier call with the same id.

This module knows the executor only through the callables it is given (``SinglesHost``), so it imports
nothing of ``executor.py``.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import (
    _STATE_TO_DESCRIPTION_MAP,
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
    RUNNING,
)
from dataclasses import dataclass
from typing import Any

from toolfork.executor.backends.dispatch import WAIT, Wait
from toolfork.executor.backends.hub import Feed
from toolfork.executor.types import (
    CallFinished,
    CallProgress,
    CallStarted,
    ErrorInfo,
    Event,
    Status,
    ToolCall,
    ToolResult,
)
from toolfork.executor.wire import WakePipe


@dataclass(frozen=True, slots=True)
class SinglesHost:
    """What ``Singles`` needs of its executor, as callables."""

    #: ``run(source, wakeup_fd, on_feed, parent_of)``: the events of one live batch fed by ``source``;
    #: ``on_feed`` is called with its ``Feed`` once the batch has started; ``parent_of(call)`` gives the
    #: tracing context captured where that call was submitted (None: not traced).
    run: Callable[[Iterable[ToolCall | Wait], int, Callable[[Feed], None], Callable[[ToolCall], Any]],
                  Iterator[Event]]
    #: ``stop(feed)``: after ``feed.stop(call)``, have the backend stop what runs.
    stop: Callable[[Feed], None]
    #: ``merge_context(updates)``: a result's context updates, into the executor's context.
    merge_context: Callable[[dict[str, Any]], None]
    #: ``closed()``: whether the executor is closed (then a failed batch reports "cancelled").
    closed: Callable[[], bool]
    #: Whether the backend runs a call as soon as it pulls it (in the host, one at a time): then a future
    #: is running from its pull, since its ``CallStarted`` comes only with its result.
    runs_when_pulled: bool = False


# Guards the making of a submitted call's Condition against its resolution without one (``CallFuture``).
_CONDITIONS = threading.Lock()
_DONE = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)


class CallbackThreads:
    """The threads that run the done-callbacks of the futures the owner thread resolves.

    A thread is taken for each callback run while the others are busy (a callback that blocks holds
    only its own thread), and a thread idle for ``IDLE_S`` ends, so at rest there are none::

        owner thread: result set, waiters woken ─> run(future's callbacks) ─> a free thread, else a new one
    """

    IDLE_S = 5.0

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[Callable[[], object]] = deque()
        self._free = 0  # threads waiting for a job

    def run(self, job: Callable[[], object]) -> None:
        with self._cond:
            self._jobs.append(job)
            if self._free >= len(self._jobs):
                self._cond.notify()
                return
        threading.Thread(target=self._serve, name="toolfork-callbacks", daemon=True).start()

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._jobs:
                    self._free += 1
                    woken = self._cond.wait(self.IDLE_S)
                    self._free -= 1
                    if not woken and not self._jobs:
                        return
                job = self._jobs.popleft()
            job()  # Future's own callback runner: each callback's exception is logged, never raised
            del job  # not kept alive while this thread waits for the next


CALLBACKS = CallbackThreads()


class CallFuture(Future[ToolResult]):
    """A submitted call's future: a ``concurrent.futures.Future`` (see the module's docstring). It is
    running once its call reaches a worker: then ``cancel()`` returns False, and
    ``Executor.cancel(future)`` stops the call.

    Its ``Condition`` is made when something first needs one: a thread that waits before the result is
    there (``result``, ``concurrent.futures.wait``, ``as_completed``), a callback (``asyncio``'s
    ``wrap_future``), a cancel. A plain Future makes it up front: a microsecond, and four objects the
    garbage collector tracks for as long as the future lives, while most futures of a busy host are
    resolved before anyone waits. A future resolved before it has a Condition is resolved under a module
    lock that making one takes too, so a waiter either finds the result or is woken by it. Everything
    else is ``Future``'s own code, which reads the attributes ``__init__`` sets (as in CPython 3.10-3.13)."""

    def __init__(self, singles: Singles | None, call: ToolCall,
                 on_progress: Callable[[Any], Any] | None = None, parent: Any = None) -> None:
        # Future.__init__ (not called): all of it but the Condition, which ``_condition`` makes.
        self._cond: threading.Condition | None = None
        self._state = PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Callable[[Future[ToolResult]], object]] = []
        self.call = call
        self.parent = parent  # the tracing context where it was submitted (None: not traced)
        # What the backend runs: a copy of its own, so that a stop names this submission alone (the
        # caller may submit the very same ToolCall object again once this one is cancelled).
        self.sent = ToolCall(call.id, call.name, call.arguments, call.timeout, call.meta)
        self.on_progress = on_progress  # called (in the owner thread) with each progress value
        self._singles = singles
        self._pulled = False  # handed to the backend (running): stopping it is the backend's business
        self._dropped = False  # cancelled while queued: the source skips it

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _CONDITIONS:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
        return cond

    def set_result(self, result: ToolResult) -> None:
        if not self._settled_unwatched(result, None):
            super().set_result(result)

    def _settled_unwatched(self, result: Any, exception: BaseException | None) -> bool:
        """Settle it without a Condition if none was made yet (no waiter, no callback: none can come
        before this is done); False when there is one, for the caller to settle under it."""
        if self._cond is None:
            with _CONDITIONS:
                if self._cond is None:
                    self._store(result, exception)
                    return True
        return False

    def _store(self, result: Any, exception: BaseException | None) -> None:
        """Its outcome, once (under either lock); a second is refused as a Future refuses it (the text
        is ``_describe``, not ``repr(self)``: that would make the Condition, under ``_CONDITIONS``)."""
        if self._state in _DONE:
            raise InvalidStateError(f"{self._state}: {self._describe()}")
        self._result, self._exception = result, exception
        self._state = FINISHED

    def mark_running(self) -> None:
        """Its call has reached a worker: running, unless it was cancelled meanwhile (being stopped)."""
        if self._cond is None:
            with _CONDITIONS:
                if self._cond is None:  # no waiter, no callback, no cancel yet: none can come before this
                    if self._state == PENDING:
                        self._state = RUNNING
                    return
        with self._condition:
            if self._state == PENDING:
                self._state = RUNNING

    def resolve(self, result: ToolResult) -> None:
        """``set_result`` for the owner thread: waiters are woken here, the done-callbacks run on
        ``CALLBACKS`` (``set_result`` runs them in the caller's thread, as a Future does)."""
        self._settle(result, None)

    def _settle(self, result: Any, exception: BaseException | None) -> None:
        if self._settled_unwatched(result, exception):
            return
        with self._condition:
            self._store(result, exception)
            for waiter in self._waiters:
                if exception is None:
                    waiter.add_result(self)
                else:
                    waiter.add_exception(self)
            self._condition.notify_all()
        if self._done_callbacks:
            CALLBACKS.run(self._invoke_callbacks)  # type: ignore[attr-defined]  # Future's, in 3.10-3.13

    def notify_cancelled(self) -> None:
        """A cancelled future's waiters (``wait``, ``as_completed``) count it done from now on."""
        with self._condition:
            if self._state == CANCELLED:
                self.set_running_or_notify_cancel()

    def __repr__(self) -> str:
        return self._describe()

    def _describe(self) -> str:
        """A Future's repr (CPython's tests read it, and its errors quote it): the class a host asked for,
        the state, what it holds. Read without the Condition: it may be called under ``_CONDITIONS``."""
        state, exception, result = self._state, self._exception, self._result
        described = _STATE_TO_DESCRIPTION_MAP[state]
        if state == FINISHED:
            if exception is not None:
                return f"<Future at {id(self):#x} state={described} raised {type(exception).__name__}>"
            return f"<Future at {id(self):#x} state={described} returned {type(result).__name__}>"
        return f"<Future at {id(self):#x} state={described}>"

    def result(self, timeout: float | None = None) -> ToolResult:
        if self._state == FINISHED and self._exception is None:  # final: no Condition needed to read it
            return self._result  # type: ignore[no-any-return]
        return super().result(timeout)

    def done(self) -> bool:
        return self._state in _DONE

    def cancelled(self) -> bool:
        return self._state in (CANCELLED, CANCELLED_AND_NOTIFIED)

    def stop(self) -> None:
        """Stop the call wherever it is: what ``Executor.cancel(future)`` does."""
        if self._singles is None:
            self.cancel()
        else:
            self._singles.stop(self)

    def cancel(self) -> bool:
        """Cancel a call not yet running (True); False once it has reached a worker or is done, as a
        Future's: ``Executor.cancel(future)`` stops a running call."""
        if not super().cancel():
            return False
        if self._singles is not None:  # None: a future no executor runs (made by hand)
            self._singles.forget(self)
        return True


class Singles:
    """The batch behind ``Executor.submit`` and the thread that owns it."""

    def __init__(self, host: SinglesHost) -> None:
        self._host = host
        self._lock = threading.Lock()
        self._queue: deque[CallFuture] = deque()
        self._futures: dict[str, CallFuture] = {}  # submitted, neither resolved nor cancelled, by call id
        # By call id: the one submission the backend has (pulled; its CallFinished not back yet) ...
        self._flowing: dict[str, CallFuture] = {}
        # ... and those that wait for it to come back (same id: an earlier call was cancelled).
        self._parked: dict[str, deque[CallFuture]] = {}
        self._signalled = False  # a byte is in the pipe that the source has not seen an empty queue since
        self._closing = False
        self._feed: Feed | None = None  # the batch's feed, once the owner thread has started it
        self._wake = WakePipe()  # readable when the queue has something new: the batch's wake-up fd
        self._thread = threading.Thread(target=self._own, name="toolfork-submit", daemon=True)
        self._thread.start()

    def submit(self, call: ToolCall, on_progress: Callable[[Any], Any] | None = None,
               parent: Any = None) -> CallFuture:
        future = CallFuture(self, call, on_progress, parent)
        with self._lock:
            if self._closing:
                raise RuntimeError("this Executor is closed; create a new one")
            if call.id in self._futures:
                raise ValueError(f"duplicate call id {call.id!r}: a call with that id is still running")
            self._futures[call.id] = future
            self._queue.append(future)
            signal = not self._signalled
            self._signalled = True
        if signal:
            self._poke()
        return future

    def _poke(self) -> None:
        self._wake.wake()

    def forget(self, future: CallFuture) -> None:
        """A future not yet running was cancelled: the source skips its call, or the backend, which has
        it waiting for a worker, stops it; its waiters are notified now."""
        with self._lock:
            if self._futures.get(future.call.id) is not future:
                return  # not submitted here, or resolved meanwhile
            del self._futures[future.call.id]
            future._dropped = True
            pulled = future._pulled
        future.notify_cancelled()
        if pulled:
            self._stop_pulled(future)

    def stop(self, future: CallFuture) -> None:
        """``Executor.cancel(future)``: a queued call is cancelled; a running one is stopped in the
        backend (its worker killed, as on a timeout) and its result is "cancelled"."""
        if future.cancel():
            return
        with self._lock:
            pulled = future._pulled and self._flowing.get(future.call.id) is future
            if pulled and self._futures.get(future.call.id) is future:
                del self._futures[future.call.id]  # its id may be used again: that call parks until this is back
        if pulled:
            self._stop_pulled(future)

    def _stop_pulled(self, future: CallFuture) -> None:
        """Stop a call the backend has (its worker killed, as on a timeout): its result is "cancelled"."""
        feed = self._feed
        if feed is not None:  # pulled implies started: the feed is known
            feed.stop(future.sent)
            self._host.stop(feed)

    @property
    def feed(self) -> Feed | None:
        return self._feed

    def _started(self, feed: Feed) -> None:
        self._feed = feed

    def cancel_all(self) -> None:
        with self._lock:
            futures = list(self._futures.values())
        for future in futures:
            self.stop(future)

    def _source(self) -> Iterator[ToolCall | Wait]:
        """Everything queued is taken at once (one lock round per burst of submits, not per call). The
        generator holds no future while it waits: a finished future is not kept alive by it."""
        in_host = self._host.runs_when_pulled
        while True:
            go = self._take()
            if go is None:
                return
            if not go:
                yield WAIT
                continue
            while go:
                future = go.popleft()
                if in_host:  # the backend runs it as it pulls it: running now
                    future.mark_running()
                sent = future.sent
                del future
                yield sent
            del sent

    def _take(self) -> deque[CallFuture] | None:
        """The futures whose calls go to the backend now (empty: none; None: closing and none left);
        a cancelled one is skipped, one whose id is still in the backend is parked. A burst that gives
        none (all cancelled or parked) looks again at once: its poke is used up."""
        while True:
            with self._lock:
                taken = self._queue
                if not taken:
                    if self._closing:
                        return None
                    self._signalled = False
                    return taken
                self._queue = deque()
                go: deque[CallFuture] = deque()
                for future in taken:
                    if future._dropped or future.cancelled():  # cancelled (``forget`` notifies its waiters)
                        continue
                    cid = future.call.id
                    if cid in self._flowing:  # an earlier (stopped) call with this id is still in the backend
                        self._parked.setdefault(cid, deque()).append(future)
                        continue
                    self._flowing[cid] = future
                    future._pulled = True  # under the lock: a cancel() from now on stops it in the backend too
                    go.append(future)
            if go:
                return go

    def _own(self) -> None:
        """The owner thread: run the live batch; resolve each future as its call finishes."""
        events = self._host.run(self._source(), self._wake.fd, self._started, self._parent_of)
        try:
            for event in events:
                if type(event) is CallFinished:
                    self._resolve(event.result)
                elif type(event) is CallStarted:
                    self._started_call(event.call_id)
                elif type(event) is CallProgress:
                    self._progress(event)
        except BaseException as exc:  # the batch itself failed (the pool is gone): fail what waits
            self._fail_rest("cancelled" if self._host.closed() else "error",
                            ErrorInfo(type(exc).__name__, f"the executor could not run the call: {exc}"))
        else:  # closed: whatever is left (none, normally) is not left waiting
            self._fail_rest("cancelled", ErrorInfo("Cancelled", "the executor was closed before the call ran"))

    def _started_call(self, call_id: str) -> None:
        """The backend sent the call to a worker: its future is running (``cancel()`` says False)."""
        future = self._flowing.get(call_id)
        if future is not None:
            future.mark_running()

    def _parent_of(self, call: ToolCall) -> Any:
        future = self._flowing.get(call.id)
        return None if future is None else future.parent

    def _fail_rest(self, status: Status, error: ErrorInfo) -> None:
        with self._lock:
            self._closing = True
            futures = list(self._futures.values())
            self._futures.clear()
            self._parked.clear()
            self._flowing.clear()
        for future in futures:
            with contextlib.suppress(InvalidStateError):
                future.resolve(ToolResult(future.call.id, future.call.name, status, error=error))

    def _progress(self, event: CallProgress) -> None:
        future = self._flowing.get(event.call_id)
        if future is not None and future.on_progress is not None and not future._dropped:
            with contextlib.suppress(Exception):  # a failing listener must not stop the batch
                future.on_progress(event.value)

    def _resolve(self, result: ToolResult) -> None:
        cid = result.call_id
        signal = False
        with self._lock:
            future = self._flowing.pop(cid, None)
            if future is not None and self._futures.get(cid) is future:
                del self._futures[cid]
            parked = self._parked.get(cid)
            released = None
            while parked and released is None:  # a call cancelled while it waited is passed over: the
                released = parked.popleft()     # one behind it goes (nothing else would release it)
                if released._dropped:
                    released = None
            if parked is not None and not parked:
                del self._parked[cid]
            if released is not None:  # its turn: the earlier call with its id has left the backend
                self._queue.appendleft(released)
                signal = not self._signalled
                self._signalled = True
        if released is not None and signal:
            self._poke()
        if result.context_updates:
            self._host.merge_context(result.context_updates)
        if future is not None:
            with contextlib.suppress(InvalidStateError):  # resolved meanwhile (the executor closing)
                future.resolve(result)

    def close(self) -> None:
        """No more submits; the source ends once the queue is empty (the executor cancels the rest)."""
        with self._lock:
            self._closing = True
        self._poke()

    def join(self) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join(10.0)
        self._wake.close()


__all__ = ["CALLBACKS", "CallFuture", "CallbackThreads", "Singles", "SinglesHost"]
