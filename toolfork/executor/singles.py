"""``Executor.submit``: single calls as ``concurrent.futures.Future`` objects, cheap enough to use one
call at a time.

Hosts such as an MCP server, pydantic-ai or the OpenAI Agents SDK start each tool call on its own. A
batch per call would cost a batch's set-up per call; instead every submitted call joins one long-lived
batch whose source is a queue (a live source: it yields ``WAIT`` when the queue is empty, and a byte
on a pipe says it has more). A thread of ours owns that batch: it pulls the queue, takes part in
driving the backend like any batch owner, and resolves each future as its result comes back. So
1,000 concurrent single calls are chunked and spread over the workers like a batch of 1,000.

Cancelling a future stops its call wherever it is: still queued (it is skipped), waiting in the
backend, or running (its worker is killed, as on a timeout). Context updates merge as results arrive.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

from toolfork.executor.backends.base import WAIT, Feed, Wait
from toolfork.executor.types import CallFinished, CallProgress, ErrorInfo, Status, ToolCall, ToolResult
from toolfork.executor.wire import WakePipe

if TYPE_CHECKING:
    from toolfork.executor.executor import Executor


class CallFuture(Future[ToolResult]):
    """A submitted call's future. ``cancel()`` stops the call even while it runs (a plain Future
    could only drop a call that has not started); the future is then cancelled."""

    def __init__(self, singles: Singles, call: ToolCall,
                 on_progress: Callable[[Any], Any] | None = None) -> None:
        super().__init__()
        self.call = call
        self.on_progress = on_progress  # called (in the owner thread) with each progress value
        self._singles = singles
        self._pulled = False  # handed to the backend: stopping it is the backend's business
        self._dropped = False  # cancelled: the source skips it (a plain flag: cheaper than cancelled())

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        self._dropped = True
        self._singles.forget(self)
        return True


class Singles:
    """The batch behind ``Executor.submit`` and the thread that owns it."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._lock = threading.Lock()
        self._queue: deque[CallFuture] = deque()
        self._futures: dict[str, CallFuture] = {}  # submitted and not resolved, by call id
        self._signalled = False  # a byte is in the pipe that the source has not seen an empty queue since
        self._closing = False
        self._wake = WakePipe()  # readable when the queue has something new: the batch's wake-up fd
        from toolfork.executor.executor import Batch

        self._batch: Batch[None] = Batch(executor)  # its feed, once the owner thread has started it
        self._thread = threading.Thread(target=self._own, name="toolfork-submit", daemon=True)
        self._thread.start()

    def submit(self, call: ToolCall, on_progress: Callable[[Any], Any] | None = None) -> CallFuture:
        future = CallFuture(self, call, on_progress)
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
        """A future was cancelled: skip its call if it is still queued, else stop it in the backend."""
        with self._lock:
            if self._futures.get(future.call.id) is future:
                del self._futures[future.call.id]
            pulled = future._pulled
        feed = self.feed
        if pulled and feed is not None:  # pulled implies started: the feed is known
            feed.stop(future.call.id)
            self._executor.backend.cancel(feed)

    @property
    def feed(self) -> Feed | None:
        return self._batch._feed

    def cancel_all(self) -> None:
        with self._lock:
            futures = list(self._futures.values())
        for future in futures:
            future.cancel()

    def _source(self) -> Iterator[ToolCall | Wait]:
        """Everything queued is taken at once (one lock round per burst of submits, not per call)."""
        while True:
            with self._lock:
                taken = self._queue
                if taken:
                    self._queue = deque()
                else:
                    if self._closing:
                        return
                    self._signalled = False
            if not taken:
                yield WAIT
                continue
            for future in taken:
                future._pulled = True  # before the check: a cancel() after it sees it pulled and stops it
                if not future._dropped:
                    yield future.call

    def _own(self) -> None:
        """The owner thread: run the live batch; resolve each future as its call finishes."""
        executor = self._executor
        events = executor._events(self._source(), None, self._wake.fd, handle=self._batch)
        try:
            for event in events:
                if type(event) is CallFinished:
                    self._resolve(event.result)
                elif type(event) is CallProgress:
                    self._progress(event)
        except BaseException as exc:  # the batch itself failed (the pool is gone): fail what waits
            with self._lock:
                self._closing = True
                futures = list(self._futures.values())
                self._futures.clear()
            status: Status = "cancelled" if executor.closed else "error"
            for future in futures:
                with contextlib.suppress(InvalidStateError):
                    future.set_result(ToolResult(future.call.id, future.call.name, status, error=ErrorInfo(
                        type(exc).__name__, f"the executor could not run the call: {exc}")))

    def _progress(self, event: CallProgress) -> None:
        future = self._futures.get(event.call_id)
        if future is not None and future.on_progress is not None:
            with contextlib.suppress(Exception):  # a failing listener must not stop the batch
                future.on_progress(event.value)

    def _resolve(self, result: ToolResult) -> None:
        future = self._futures.pop(result.call_id, None)  # atomic: no lock needed
        if result.context_updates:
            self._executor.context.update(result.context_updates)
        if future is not None:
            with contextlib.suppress(InvalidStateError):  # cancelled meanwhile
                future.set_result(result)

    def close(self) -> None:
        """No more submits; the source ends once the queue is empty (the executor cancels the rest)."""
        with self._lock:
            self._closing = True
        self._poke()

    def join(self) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join(10.0)
        self._wake.close()


__all__ = ["CallFuture", "Singles"]
