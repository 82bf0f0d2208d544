"""The values a batch hands its backend: the ``Dispatch`` (a call resolved in the host), the ``Feed``
it pulls them from, ``WAIT``, and the ``BatchState`` a ``Hub`` keeps of a batch.

Why a module of its own: every backend (fork pool, sequential, Ray), the ``Hub`` and the Executor
speak in these values; none of them is a backend or the scheduler. Data flow::

    Executor (CallBook.admit) ── Dispatch | ready events | WAIT ──> Feed (pulled lazily, with the
        consumer's room) ──> the backend (alone: ``run_batch``; shared workers: the ``Hub``)

A ``Feed`` says where its source is (``polling``, ``waiting``, ``exhausted``, ``cancelled``); the owner
of the batch reads those to decide whether to pull, wait for the source, or end (``settled``).
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolfork.executor.types import CallFinished, CallStarted, ErrorInfo, Event, ToolCall, ToolResult
from toolfork.executor.wire import drain
from toolfork.executor.wire.callitem import CallItem, TraceParent

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool

POLL_INTERVAL = 0.01  # how often a live source without a wake-up fd is asked again


@dataclass(slots=True)
class Dispatch:
    """A call ready to run: its tool resolved and its effective timeout (None: unbounded)."""

    call: ToolCall
    tool: Tool
    timeout: float | None
    context: dict[str, Any] = field(default_factory=dict)
    requeues: int = 0  # times a worker died before it could start this call
    batch: BatchState | None = None  # the batch it belongs to, where a Hub routes its events
    stopped: bool = False  # its outcome is no longer wanted (a cancelled future): drop its result
    slot: Any = None  # its place under its tool's caps while sent (``Governance.admit``), else None
    trace: TraceParent | None = None  # its span, where the tool's own spans go (None: not traced)

    def item(self) -> CallItem:
        """The call as the place it runs receives it (see ``wire.callitem``)."""
        call = self.call
        return (call.id, call.name, call.arguments, self.timeout, self.context or None, call.meta, self.trace)

    # What the fork pool's worker core knows an item by (a line lane's Line has the same two).
    @property
    def call_id(self) -> str:
        return self.call.id

    @property
    def name(self) -> str:
        return self.call.name


class Wait:
    """The type of ``WAIT``."""

    def __repr__(self) -> str:
        return "WAIT"


#: A live source of calls yields WAIT when no call is available yet (a co-process whose client has
#: not written the next line): the backend keeps running what is in flight and asks again when the
#: source's wake-up fd becomes readable.
WAIT = Wait()


class Feed:
    """Dispatches pulled lazily by a backend, with backpressure from whoever consumes the results.

    The source yields ``Dispatch`` items, lists of ready-made events (an unknown tool's error, an inline
    call's result: all of one call's events at once) that the backend passes on through ``immediate``,
    or ``WAIT``. ``room()`` says whether the
    consumer can take more (imap's window); None means always. ``wakeup_fd`` (with a live source) is
    readable when the source has more; the backend drains it. ``polling`` (set by the source) says that
    the source must be asked again soon whatever the fd says (an inline call waits for its cap or rate
    limit): ``wakeup_fd`` reads None meanwhile, so every backend polls it, and its owner drives.
    """

    __slots__ = ("_lock", "_retry", "_room", "_source", "_stops", "_wakeup_fd", "cancelled", "exhausted",
                 "immediate", "polling", "starts", "waiting")

    def __init__(self, source: Iterable[Dispatch | list[Event] | Wait], room: Callable[[], bool] | None = None,
                 wakeup_fd: int | None = None, *, starts: bool = True) -> None:
        self._source: Iterator[Dispatch | list[Event] | Wait] = iter(source)
        self._room = room
        self._wakeup_fd = wakeup_fd
        # Whether the consumer reads CallStarted: ``Executor.run`` keeps results alone, so a backend may
        # leave out the starts of the calls it sends (the fork pool does: two objects less a call).
        self.starts = starts
        self.polling = False
        self.waiting = False
        self.exhausted = False
        self.cancelled = False
        self.immediate: list[Event] = []
        self._retry: list[Dispatch] = []
        # Single calls whose stop was asked for (Executor.submit futures), by the identity of their
        # ToolCall object (an id may come back: a cancelled call's id reused), the objects kept alive.
        self._stops: dict[int, ToolCall] = {}
        self._lock = threading.Lock()  # stop() comes from any thread; take_stops() from the driver

    @property
    def wakeup_fd(self) -> int | None:
        """The fd to watch for the source having more; None: ask it again after a short poll."""
        return None if self.polling else self._wakeup_fd

    def retry(self, dispatch: Dispatch) -> None:
        """Run ``dispatch`` again (a tool that declares ``retries``); it goes before new calls."""
        self._retry.append(dispatch)
        self.exhausted = False

    def cancel(self) -> None:
        """From now on, calls not yet started come out as "cancelled" results (``Executor.cancel``)."""
        self.cancelled = True

    def stop(self, call: ToolCall) -> None:
        """Stop one call already pulled (a cancelled future), named by its ``ToolCall`` object: the
        backend kills it if it runs. Then ``Backend.cancel(feed)`` has the backend act on it."""
        with self._lock:
            self._stops[id(call)] = call

    def take_stops(self) -> dict[int, ToolCall]:
        """The stops asked for since the last take (``id(call)`` -> call), each handed out once."""
        with self._lock:
            stops, self._stops = self._stops, {}
        return stops

    def pull(self) -> Dispatch | None:
        """The next dispatch, or None when the source is exhausted or the consumer has no room."""
        if self.cancelled:
            self._cancel_rest()
            return None
        if self._retry:
            return self._retry.pop(0)
        self.waiting = False
        while not self.exhausted and (self._room is None or self.polling or self._room()):
            item = next(self._source, None)
            if item is None:
                self.exhausted = True
                return None
            if isinstance(item, Dispatch):
                return item
            if item is WAIT:
                self.waiting = True
                return None
            self.immediate.extend(item)  # type: ignore[arg-type]
        return None

    def _cancel_rest(self) -> None:
        for d in self._retry:
            self.immediate.append(cancelled(d))
        self._retry.clear()
        while not self.exhausted and (self._room is None or self.polling or self._room()):
            item = next(self._source, None)
            if item is None or item is WAIT:  # a live source is not waited for once cancelled
                self.exhausted = True
            elif isinstance(item, Dispatch):
                self.immediate.append(CallStarted(item.call.id, item.call.name))
                self.immediate.append(cancelled(item))
            else:
                self.immediate.extend(item)  # type: ignore[arg-type]

    def wait_for_source(self, timeout: float | None) -> None:
        """Block until the live source has more (or ``timeout``); used when nothing else can happen."""
        if self.wakeup_fd is None:
            time.sleep(POLL_INTERVAL if timeout is None else min(timeout, POLL_INTERVAL))
            return
        ready, _, _ = select.select([self.wakeup_fd], [], [], timeout)
        if ready:
            self.drain_wakeup()

    def drain_wakeup(self) -> None:
        fd = self._wakeup_fd
        if fd is None:
            return
        try:
            os.set_blocking(fd, False)
        except OSError:
            return
        drain(fd)

    def take_immediate(self) -> list[Event]:
        events, self.immediate = self.immediate, []
        return events


def cancelled(d: Dispatch, *, running: bool = False) -> CallFinished:
    """The result of a call stopped by ``Executor.cancel`` (``running``: it had started)."""
    how = "was stopped while running" if running else "was not started"
    return CallFinished(d.call.id, ToolResult(d.call.id, d.call.name, "cancelled", error=ErrorInfo(
        "Cancelled", f"tool '{d.call.name}' {how}: the batch was cancelled")))


def run_batch(feed: Feed, submit: Callable[[list[Event]], int],
              wait: Callable[[list[Event]], None]) -> Iterator[Event]:
    """The loop of a backend that runs several calls at once, around its two moves.

    ``submit(events)`` starts what the backend has room for (pulling from the feed) and returns how
    many dispatches it pulled; ``wait(events)`` blocks until something happens (a result, progress, a
    deadline, a wake-up) and appends the events. This loop does the bookkeeping they share: every
    pulled dispatch is outstanding until its ``CallFinished`` is yielded; the feed's immediate events
    pass through; a live source with nothing to give is waited for; and a consumer that can make no
    room while nothing runs is an error instead of a hang.
    """
    events: list[Event] = []
    outstanding = 0
    yielded = False
    while True:
        outstanding += submit(events)
        if feed.immediate:
            ready = feed.take_immediate()
            outstanding += sum(1 for ev in ready if type(ev) is CallFinished)
            events.extend(ready)
        if events:
            outstanding -= sum(1 for ev in events if type(ev) is CallFinished)
            taken = events[:]
            events.clear()
            yield from taken
            yielded = True
            continue
        if not outstanding:
            if settled(feed, yielded):
                return
            yielded = False
            continue
        wait(events)


def settled(feed: Feed, yielded: bool) -> bool:
    """A batch loop with nothing outstanding: True when the batch is done; else wait for a live source
    with nothing to give yet, or raise if the consumer can make no room (nothing would ever change)."""
    if feed.exhausted:
        return True
    if feed.waiting:
        feed.wait_for_source(None)
    elif not yielded:
        raise RuntimeError("the feed has no room although nothing is outstanding")
    return False



class BatchState:
    """One ``execute`` call inside a ``Hub``: what its owner pulled, and what the driver routed to it."""

    __slots__ = ("abandoned", "capped", "events", "feed", "outstanding", "poked", "ready")

    def __init__(self, feed: Feed) -> None:
        self.feed = feed
        self.ready: deque[Dispatch] = deque()  # pulled by the owner, not sent yet (requeued ones in front)
        # Calls of gated tools that were refused a slot or a token, by tool, in call order: they wait
        # here, off ``ready``, so the calls behind them go first (see ``Hub.take_next``).
        self.capped: dict[str, deque[Dispatch]] = {}
        self.events: list[Event] = []  # routed by the driver, taken by the owner
        self.outstanding = 0  # dispatches pulled whose CallFinished the owner has not taken yet
        self.poked = False  # the owner should look at its feed again (its live source has more)
        self.abandoned = False  # the owner stopped early: its calls are stopped, nothing is routed


__all__ = ["POLL_INTERVAL", "WAIT", "BatchState", "Dispatch", "Feed", "Wait", "cancelled", "run_batch", "settled"]
