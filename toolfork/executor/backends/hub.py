"""How a batch's calls are pulled (the ``Feed``), and the scheduler of a backend with shared workers:
the batches live on it, who drives it, and the one settle/route rule.

Why: several batches (threads, asyncio tasks, a batch started while another is iterated, ``submit``'s
long-lived batch) share one pool's workers. Nothing here knows what a worker is: a backend that
implements ``Driven`` (the fork pool, Ray) runs its rounds through a ``Hub``, and the Hub decides which
batch's call starts next, which owner drives, and which batch an event goes to. A backend that runs
one batch by itself (sequential) pulls its feed in ``run_batch``. A ``Feed`` says where its source is
(``polling``, ``waiting``, ``exhausted``, ``cancelled``); the owner of the batch reads those to decide
whether to pull, wait for the source, or end (``settled``).

Data flow (each batch's owner thread runs ``Hub.execute`` on its own ``Feed``)::

    owner A: Feed.pull ──> BatchState.ready ─┐                         ┌─> BatchState.events ──> owner A
    owner B: Feed.pull ──> BatchState.ready ─┼─ take_next (round-robin, ┤   (Hub.route / Hub.finish,
                                             │  caps: BatchState.capped)│    inside Hub.locked)
                                             ▼                         │
             whichever owner holds ``drive``: backend.hub_round() ─────┘
             the watcher thread (no owner drives): backend.hub_tend() at a deadline or a request
"""

from __future__ import annotations

import contextlib
import enum
import math
import os
import select
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

from toolfork.executor.backends.dispatch import WAIT, Dispatch, Wait, cancelled
from toolfork.executor.types import CallFinished, CallStarted, Event, ToolCall, ToolResult
from toolfork.executor.wire import drain

R = TypeVar("R")
WATCH_RETRY_S = 0.1  # how soon the watcher looks again at a deadline an owner should have expired
WATCHER = "toolfork-deadlines"  # the watcher thread's name
POLL_INTERVAL = 0.01  # how often a live source without a wake-up fd is asked again


class SourceState(enum.Enum):
    """Where a batch's source stands (``Feed.state``), read from the flags the hot path sets: they are
    not one state (a waiting source can also be polling; a cancelled one drains until it is also
    exhausted), so they stay stored as flags and this is what they add up to."""

    OPEN = "open"  # it may have more: pull when the consumer has room
    WAITING = "waiting"  # a live source said WAIT: nothing until its wake-up fd is readable
    POLLING = "polling"  # an inline call waits for its cap or rate limit: ask again soon, whatever the fd says
    EXHAUSTED = "exhausted"  # it has nothing more (retries put back reopen it)
    CANCELLED = "cancelled"  # the batch was cancelled: whatever it still gives comes out "cancelled"


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
    def state(self) -> SourceState:
        if self.cancelled:
            return SourceState.CANCELLED
        if self.exhausted:
            return SourceState.EXHAUSTED
        if self.polling:
            return SourceState.POLLING
        return SourceState.WAITING if self.waiting else SourceState.OPEN

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
        got = self.pull_upto(1)
        return got[0] if got else None

    def pull_upto(self, n: int | None) -> list[Dispatch]:
        """The next dispatches in order, at most ``n`` (None: all the source gives now): retried calls
        first, then the source's, until it is exhausted, says ``WAIT`` or the consumer has no room. The
        Hub takes a round's calls in one call of this (a call less per tool call than ``pull`` each)."""
        out: list[Dispatch] = []
        if self.cancelled:
            self._cancel_rest()
            return out
        retry = self._retry
        while retry:
            out.append(retry.pop(0))
            if n is not None and len(out) >= n:
                return out
        self.waiting = False
        source, room, immediate = self._source, self._room, self.immediate
        while not self.exhausted and (room is None or self.polling or room()):
            item = next(source, None)
            if item is None:
                self.exhausted = True
                break
            if type(item) is Dispatch:
                out.append(item)
                if n is not None and len(out) >= n:
                    break
                continue
            if item is WAIT:
                self.waiting = True
                break
            immediate.extend(item)  # type: ignore[arg-type]
        return out

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

    @property
    def state(self) -> BatchPhase:
        if self.abandoned:
            return BatchPhase.ABANDONED
        return BatchPhase.POKED if self.poked else BatchPhase.OWNED


class BatchPhase(enum.Enum):
    """Where a batch stands with its owner (``BatchState.state``), read from its two flags: the driver
    sets ``poked`` while the owner sets ``abandoned``, each write on its own (one stored field would
    need a read-then-write under the Hub's lock on every poke, lest a poke undo an abandon)."""

    OWNED = "owned"  # its owner pulls and takes its events; the driver routes to it
    POKED = "poked"  # a driver saw its live source's fd readable: the owner empties it and pulls again
    ABANDONED = "abandoned"  # its owner left early: its calls are stopped, nothing more is routed to it


class Driven(Protocol):
    """What a backend gives its ``Hub``. ``hub_round``, ``hub_settle`` and ``hub_tend`` run with
    ``Hub.drive`` held."""

    def hub_round(self) -> None:
        """Start what can start, wait once for something to happen, route the events (what the owners
        share, inside ``Hub.locked`` steps), settle the requests; return."""

    def hub_settle(self) -> None:
        """Act on the Hub's requests (cancelled, stopped or abandoned batches) without waiting."""

    def wake(self) -> None:
        """Interrupt the driver's wait (any thread)."""

    def hub_tend(self) -> None:
        """Without waiting and without starting calls: take what the workers sent, expire deadlines
        that passed, settle the requests (the watcher's turn, while no owner drives)."""

    def next_deadline(self) -> float | None:
        """The earliest deadline of a running call (``time.monotonic``), or None (any thread)."""


class Hub:
    """The batches live on one backend, and the rule for who drives it.

    The Hub's lock (``_cond``) guards every batch's ``ready``, ``events`` and ``poked`` and the
    requests; only the Hub's methods take it: a backend runs the parts of its round that touch them
    as a step of ``locked`` (and ``settle`` takes it itself). ``drive`` is
    held by the one owner that runs the backend's rounds for everybody. An owner that needs progress
    takes ``drive`` if it is free, else sleeps on the lock's condition until the driver routes it events or
    lets go.
    So one batch alone runs exactly as before (its own thread drives, no hand-off), and a batch started
    while another is being iterated, from the same thread or another, simply joins.
    """

    def __init__(self, backend: Driven) -> None:
        # Re-entrant: a batch abandoned without being closed (a generator in a reference cycle) is
        # finalized by the garbage collector, which can run inside any allocation, also one made while
        # this thread holds the lock; its ``_leave`` then takes it again. So everything that
        # walks ``batches`` under the lock walks a copy.
        self._cond = threading.Condition(threading.RLock())
        self.drive = threading.Lock()
        self.batches: list[BatchState] = []
        self.turn = 0  # round-robin position in ``batches``
        self._requests: set[BatchState] = set()
        self._backend = backend
        self._watch: threading.Event | None = None  # set: the watcher looks again now
        self._watch_at = math.inf  # when the watcher looks next by itself
        self._watch_stopped = False
        self.closed = False  # its backend's close() has begun (``closing``): no batch starts any more

    # ------------------------------------------------------------ the watcher
    # Owners drive only while they need progress; while they hand events to their consumers (a full
    # stdout pipe, a slow progress listener, a thread that does something else), nobody drives. So
    # deadlines and cancels cannot rest on them: a thread of the Hub's own, the watcher, takes ``drive``
    # when it is free and a deadline has passed or a request waits, and tends the backend (reads what
    # came, expires, settles; it starts nothing). It never runs user code and never writes to a
    # consumer, so nothing a consumer does can hold it up. Asleep otherwise: it wakes at the next
    # deadline, on a request, and when an owner lets go with an earlier deadline pending.

    def watch(self) -> None:
        """Start the watcher (once, after the backend can tend); ``unwatch`` ends it."""
        if self._watch is not None:
            return
        self._watch = event = threading.Event()
        # The callback wakes the watcher when the Hub is collected, so its thread ends too.
        ref = weakref.ref(self, lambda _: event.set())
        threading.Thread(target=_watch, args=(ref, event), name=WATCHER, daemon=True).start()

    def unwatch(self) -> None:
        self._watch_stopped = True
        if self._watch is not None:
            self._watch.set()

    def _watch_round(self) -> float | None:
        """One look of the watcher; returns how long it may sleep (None: until woken)."""
        backend = self._backend
        deadline = backend.next_deadline()
        now = time.monotonic()
        if self._requests or (deadline is not None and deadline <= now):
            if not self.drive.acquire(blocking=False):
                # An owner drives: it expires and settles in its own round and wakes us as it lets go.
                # Looked at again soon all the same, in case that owner is held up.
                self._watch_at = now + WATCH_RETRY_S
                return WATCH_RETRY_S
            try:
                backend.hub_tend()
            finally:
                self._let_go()
            deadline = backend.next_deadline()
            now = time.monotonic()
            if deadline is not None and deadline <= now:  # not expired after all (a broken backend)
                self._watch_at = now + WATCH_RETRY_S
                return WATCH_RETRY_S
        self._watch_at = math.inf if deadline is None else deadline
        return None if deadline is None else max(0.0, deadline - now)

    def execute(self, feed: Feed) -> Iterator[Event]:
        """The owner's loop: pull its feed, take its events, drive when nobody does."""
        b = BatchState(feed)
        with self._cond:
            self.batches.append(b)
        yielded = False
        rearm = False  # a driver stopped watching this batch's wake-up fd: it must be told to look again
        try:
            while True:
                # The wake-up rule of a live source: a driver that sees its fd readable only marks the
                # batch ``poked`` (and stops watching it); the owner clears the mark and empties the fd,
                # then pulls. A byte that comes after the drain stays for the next look, so a call
                # submitted while the owner pulls is never left in the source unseen.
                with self._cond:
                    rearm = rearm or b.poked
                    b.poked = False
                if feed.waiting:
                    feed.drain_wakeup()
                pulled = self._fill(b)
                if feed.immediate:
                    yield from feed.take_immediate()
                    yielded = True
                    continue
                with self._cond:
                    events, b.events = b.events, []
                if events:
                    b.outstanding -= list(map(type, events)).count(CallFinished)
                    yield from events
                    yielded = True
                    continue
                # A source that polls (an inline call waits for a slot a pool call may hold) drives while it
                # waits: this thread may be the only one left to read that pool call's result.
                if not b.outstanding and not (feed.waiting and feed.polling):
                    if settled(feed, yielded):
                        return
                    yielded = False
                    continue
                if self.drive.acquire(blocking=False):
                    rearm = False  # each of our rounds watches what is live
                    try:
                        while not (b.events or b.poked):
                            self._backend.hub_round()
                    finally:
                        self._let_go()
                else:
                    if pulled or rearm:  # the driver is waiting: it has new calls to start, or our fd to watch
                        rearm = False
                        self._backend.wake()
                    with self._cond:
                        self._cond.wait_for(lambda: b.events or b.poked or not self.drive.locked())
        finally:
            self._leave(b)

    def _fill(self, b: BatchState) -> int:
        pulled = b.feed.pull_upto(None)
        for d in pulled:
            d.batch = b
        if pulled:
            b.outstanding += len(pulled)
            with self._cond:
                b.ready.extend(pulled)
        return len(pulled)

    def request(self, feed: Feed) -> None:
        """The batch of ``feed`` was cancelled, or asked to stop calls: tell the driver."""
        with self._cond:
            for b in tuple(self.batches):
                if b.feed is feed:
                    self._requests.add(b)
                    b.poked = True  # its owner pulls again: calls not pulled yet come out cancelled
            self._cond.notify_all()
        self._backend.wake()
        if self._watch is not None:  # nobody may be driving: the watcher settles it then
            self._watch.set()

    def _leave(self, b: BatchState) -> None:
        """The owner is done, or stopped early: its calls still pulled are stopped, nothing is lost."""
        with self._cond:
            self.batches.remove(b)
            if not b.outstanding:
                return
            b.abandoned = True
            self._requests.add(b)
        if self.drive.acquire(blocking=False):
            try:
                self._backend.hub_settle()
            finally:
                self._let_go()
        else:
            self._backend.wake()  # the driver settles it, in its round or as it lets go

    def _let_go(self) -> None:
        """Release ``drive``. A request that came after the driver's last round (an owner that left
        while we drove) is settled now, so that no stopped call runs on until somebody drives again."""
        while True:
            self.drive.release()
            with self._cond:
                self._cond.notify_all()  # a follower may take over
            if not self._requests or not self.drive.acquire(blocking=False):
                watch = self._watch
                if watch is not None and threading.current_thread().name != WATCHER:
                    deadline = self._backend.next_deadline()
                    if deadline is not None and deadline < self._watch_at:
                        watch.set()  # nobody may drive from now on: the watcher keeps the deadline
                return
            try:
                self._backend.hub_settle()
            except BaseException:
                self.drive.release()
                raise

    # ------------------------------------------------------------ the lock, for the backends

    def locked(self, step: Callable[[], R], *, wake: bool = True) -> R:
        """Run ``step`` (a backend's part of a round that reads or changes what the owners share: the
        batches' ``ready`` and ``events``, the requests) with the Hub's lock held; then, if ``wake``,
        wake the owners so each sees its events. Returns what ``step`` returns."""
        with self._cond:
            out = step()
            if wake:
                self._cond.notify_all()
        return out

    def to_watch(self) -> list[BatchState]:
        """The batches whose wake-up fd a driver's round watches: live sources waiting for a call, not
        yet marked ``poked`` (a marked one's owner empties its fd before it pulls; see ``execute``)."""
        return [b for b in tuple(self.batches) if b.feed.waiting and not b.poked] if self.batches else []

    def wake_owners(self) -> None:
        """Wake every owner waiting for events (also from inside a ``locked`` step: the lock is re-entrant)."""
        with self._cond:
            self._cond.notify_all()

    @contextlib.contextmanager
    def closing(self, timeout: float) -> Iterator[bool]:
        """For a backend's ``close()`` (after its ``wake()``): the drive lock, waiting up to ``timeout`` for
        the driver to end its round, so that nothing is started or routed under the close; yields whether
        it was had (a driver that never lets go, such as a hook calling close() from inside a wait: close
        without it). Let go at the end, and every owner woken to see the batch's end. From now on no
        batch starts (``HubBackend.execute``)."""
        self.closed = True
        driving = self.drive.acquire(timeout=timeout)
        try:
            yield driving
        finally:
            if driving:
                self.drive.release()
            self.wake_owners()

    @property
    def pending(self) -> bool:
        """Whether cancel or stop requests wait to be settled (read without the lock: a hint)."""
        return bool(self._requests)

    def cancel_everything(self, placed: Iterable[tuple[Dispatch, bool]]) -> None:
        """Closing (inside a ``locked`` step): every call the backend holds (``placed``, each with whether it
        is running) and every call not sent yet, of every batch, is reported "cancelled"; the requests
        are dropped (nothing is left for them to act on). The backend stops what ran."""
        for d, running in placed:
            self.finish(d, cancelled(d, running=running).result)
        for b in tuple(self.batches):
            for d in (*b.ready, *(d for waiting in b.capped.values() for d in waiting)):
                self.finish(d, cancelled(d).result)
            b.ready.clear()
            b.capped.clear()
        self._requests.clear()

    # ------------------------------------------------------------ the one settle/route rule
    # Every backend that runs several calls at once (the fork pool, Ray) routes and settles through
    # these, inside a ``locked`` step: the lock belongs to the Hub, and so does the rule.

    @staticmethod
    def route(d: Dispatch, event: Event) -> None:
        """Hand an event to the batch of its call (inside a ``locked`` step), unless nobody wants it any more: the
        call was stopped (its "cancelled" result went already) or its batch's owner left."""
        b = d.batch
        if not d.stopped and b is not None and not b.abandoned:
            b.events.append(event)

    @classmethod
    def finish(cls, d: Dispatch, result: ToolResult) -> None:
        cls.route(d, CallFinished(d.call.id, result))

    def settle(self, placed: Callable[[BatchState], Iterable[tuple[Dispatch, bool]]],
               kill: Callable[[list[Dispatch]], None]) -> None:
        """Act on the requests (the Hub's lock taken here): for a cancelled or abandoned batch every call it has in
        the backend, for a batch asked to stop calls (cancelled futures) those calls, is reported
        "cancelled" and stopped, once. ``placed(b)`` lists the backend's dispatches of ``b`` (sent to a
        worker or a task), each with whether it is running; ``kill`` gets the running ones to stop
        (after their results went; a dispatch queued behind one of them that was not stopped is the
        backend's to run elsewhere). Calls not sent yet (``b.ready``) are dropped here."""
        with self._cond:
            self._settle(placed, kill)

    def _settle(self, placed: Callable[[BatchState], Iterable[tuple[Dispatch, bool]]],
                kill: Callable[[list[Dispatch]], None]) -> None:
        requests = list(self._requests)
        self._requests.clear()
        for b in requests:
            whole = b.abandoned or b.feed.cancelled
            stops = b.feed.take_stops()
            if not whole and not stops:
                continue
            kills: list[Dispatch] = []
            for d, running in list(placed(b)):
                if not d.stopped and (whole or id(d.call) in stops):
                    self.finish(d, cancelled(d, running=running).result)
                    d.stopped = True
                    if running:
                        kills.append(d)
            for queue in (b.ready, *b.capped.values()):  # calls not sent yet
                keep: list[Dispatch] = []
                for d in queue:
                    if whole or id(d.call) in stops:
                        self.finish(d, cancelled(d).result)
                        d.stopped = True
                    else:
                        keep.append(d)
                queue.clear()
                queue.extend(keep)
            for name in [name for name, waiting in b.capped.items() if not waiting]:
                del b.capped[name]
            if kills:
                kill(kills)

    def queued(self) -> int:
        """Calls pulled by owners, not yet sent (ready, or capped: waiting for a cap), any thread, a snapshot."""
        return sum(len(b.ready) + sum(len(q) for q in list(b.capped.values())) for b in list(self.batches))

    def capped_tools(self) -> set[str]:
        """The tools whose calls wait in some batch's capped queue (inside a ``locked`` step)."""
        return {name for b in self.batches for name in b.capped}

    def take_next(self, admit: Callable[[Dispatch], bool] | None = None) -> tuple[BatchState, Dispatch] | None:
        """The next call to start, taken off its batch's queue (inside a ``locked`` step): the batches
        take turns (round-robin), one call each. With ``admit`` (an executor with gated tools), the
        call is the batch's first that ``admit`` lets start (taking its slot and token; see
        ``_first_admitted``)."""
        batches = tuple(self.batches)
        n = len(batches)
        for i in range(n):
            b = batches[(self.turn + i) % n]
            if admit is not None:
                d = self._first_admitted(b, admit)
            else:
                d = b.ready.popleft() if b.ready else None
            if d is not None:
                self.turn = (self.turn + i + 1) % n
                return b, d
        return None

    @staticmethod
    def _first_admitted(b: BatchState, admit: Callable[[Dispatch], bool]) -> Dispatch | None:
        """``b``'s first call that ``admit`` lets start. A call of a gated tool that is refused moves to
        ``b.capped`` for its tool, so the calls behind it are looked at (a waiting call delays nobody) and
        each call is looked at once per refusal; capped calls go first, in call order, when their tool is
        admitted again."""
        for name, waiting in b.capped.items():
            if admit(waiting[0]):
                d = waiting.popleft()
                if not waiting:
                    del b.capped[name]
                return d
        ready = b.ready
        while ready:
            d = ready.popleft()
            if admit(d):
                return d
            b.capped.setdefault(d.call.name, deque()).append(d)
        return None


def _watch(ref: weakref.ReferenceType[Hub], event: threading.Event) -> None:
    """The watcher's thread (see ``Hub.watch``). It holds its Hub only while it looks, so a pool that
    the program dropped without closing is still collected (and its finalizer still runs)."""
    while True:
        event.clear()
        hub = ref()
        if hub is None or hub._watch_stopped:
            return
        try:
            timeout = hub._watch_round()
        except Exception:  # the backend is broken (its template died): the owners hear of it
            timeout = WATCH_RETRY_S * 10
        del hub
        event.wait(timeout)


__all__ = ["POLL_INTERVAL", "WATCHER", "WATCH_RETRY_S", "BatchPhase", "BatchState", "Driven", "Feed", "Hub",
           "SourceState", "run_batch", "settled"]
