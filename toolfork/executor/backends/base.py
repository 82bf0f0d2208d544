"""What a backend is: something that runs prepared calls and reports events as they happen.

The ``Executor`` front does everything that does not depend on where a call runs (resolving tools,
unknown names, duplicate ids, effective timeouts, inline tools, ordering, context merging); a backend
only turns ``Dispatch`` items into events. It pulls them from a ``Feed`` as it has room, so a batch
job of a million lines never sits in memory at once. Contract for ``execute``: yield ``CallStarted`` /
``CallProgress`` / ``CallFinished`` in completion order, exactly one ``CallFinished`` per dispatch
pulled, pass on the feed's ``immediate`` events (results the front made itself), and never raise
because a tool failed. If the consumer stops early (``GeneratorExit``) the backend stops and kills
what is still running.
"""

from __future__ import annotations

import os
import select
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolfork.executor.types import CallFinished, CallStarted, ErrorInfo, Event, ToolCall, ToolResult

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool

Hook = Callable[[], Any]
POLL_INTERVAL = 0.01  # how often a live source without a wake-up fd is asked again


@dataclass(slots=True)
class Dispatch:
    """A call ready to run: its tool resolved and its effective timeout (None: unbounded)."""

    call: ToolCall
    tool: Tool
    timeout: float | None
    context: dict[str, Any] = field(default_factory=dict)
    requeues: int = 0  # times a worker died before it could start this call


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
    readable when the source has more; the backend drains it.
    """

    __slots__ = ("_retry", "_room", "_source", "cancelled", "exhausted", "immediate", "size_hint", "waiting",
                 "wakeup_fd")

    def __init__(self, source: Iterable[Dispatch | list[Event] | Wait], room: Callable[[], bool] | None = None,
                 size_hint: int | None = None, wakeup_fd: int | None = None) -> None:
        self._source: Iterator[Dispatch | list[Event] | Wait] = iter(source)
        self._room = room
        self.size_hint = size_hint
        self.wakeup_fd = wakeup_fd
        self.waiting = False
        self.exhausted = False
        self.cancelled = False
        self.immediate: list[Event] = []
        self._retry: list[Dispatch] = []

    def retry(self, dispatch: Dispatch) -> None:
        """Run ``dispatch`` again (a tool that declares ``retries``); it goes before new calls."""
        self._retry.append(dispatch)
        self.exhausted = False

    def cancel(self) -> None:
        """From now on, calls not yet started come out as "cancelled" results (``Executor.cancel``)."""
        self.cancelled = True

    def pull(self) -> Dispatch | None:
        """The next dispatch, or None when the source is exhausted or the consumer has no room."""
        if self.cancelled:
            self._cancel_rest()
            return None
        if self._retry:
            return self._retry.pop(0)
        self.waiting = False
        while not self.exhausted and (self._room is None or self._room()):
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
        while not self.exhausted and (self._room is None or self._room()):
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
        if self.wakeup_fd is None:
            return
        try:
            os.set_blocking(self.wakeup_fd, False)
            while os.read(self.wakeup_fd, 4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

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
            batch = events[:]
            events.clear()
            yield from batch
            yielded = True
            continue
        if not outstanding:
            if feed.exhausted:
                return
            if feed.waiting:  # a live source with nothing to give yet, and nothing running
                feed.wait_for_source(None)
                continue
            if not yielded:  # the consumer cannot make room: nothing would ever change
                raise RuntimeError("the feed has no room although nothing is outstanding")
            yielded = False
            continue
        wait(events)


@dataclass(slots=True)
class Hooks:
    before_child: Hook | None = None
    after_child: Hook | None = None
    on_worker_start: Hook | None = None


class Backend(ABC):
    """A place where calls run. Subclasses set ``mode``."""

    mode: str = ""

    def add_tools(self, tools: list[Tool]) -> None:  # noqa: B027 - optional for in-process backends
        """Make tools registered after start reachable where calls run."""

    @abstractmethod
    def execute(self, feed: Feed) -> Iterator[Event]:
        """Run what ``feed`` gives; yield events in completion order (see module docstring)."""

    def wake(self) -> None:  # noqa: B027 - backends that never block in a wait need nothing
        """Called from another thread after ``Feed.cancel``: interrupt a wait so the batch notices."""

    def close(self) -> None:  # noqa: B027 - in-process backends hold nothing
        """Release workers; must leave no process behind and be safe to call twice."""


__all__ = ["WAIT", "Backend", "Dispatch", "Feed", "Hooks", "Wait", "cancelled", "run_batch"]
