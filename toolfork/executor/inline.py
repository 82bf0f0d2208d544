"""Inline calls (``Tool(inline=True)``): run in the host, in the thread that pulls the batch's source,
and never wait there for a cap or a rate limit.

Why they must not wait in that thread: the thread that pulls a batch's source is that batch's owner,
and owners drive the backend (``backends/base.py``, ``Hub``). An inline call that waited there for its
group's slot, held by a pool call of the same group, would stop the one thread that could read that pool
call's result and give the slot back: neither would ever finish (a deadlock, seen with two ``submit``
calls). So a gated inline call takes its slot and token without waiting (``Governance.admit``); when it
cannot, it is parked here, the calls behind it go on, and the source says ``WAIT`` with the feed marked
``polling`` (its owner keeps driving the backend and asks the source again soon), until it gets in:

    source call ──> inline? ──no──> Dispatch (the backend's)
                       │yes
                       ├─ admitted now ──> run here ──> its events; slot back; backend woken
                       └─ refused ──> parked ──(asked again on every pull)──> admitted ──> run here

Parked calls run in call order per tool. A slot given back by an inline call wakes the backend's
driver, whose pool calls of the same group may be waiting for it. Once the batch is cancelled, parked
calls come out "cancelled".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from toolfork.executor.backends.dispatch import Dispatch, cancelled
from toolfork.executor.backends.hub import Feed
from toolfork.executor.backends.sequential import run_in_host
from toolfork.executor.types import CallFinished, CallProgress, CallStarted, Event

if TYPE_CHECKING:
    from toolfork.governance.caps import Slot
    from toolfork.governance.policy import Governance


class InlineCalls:
    """The inline calls of one batch (see the module docstring). Used by the thread that pulls its source."""

    def __init__(self, governance: Governance, wake: Callable[[], None]) -> None:
        self._governance = governance
        self._wake = wake  # interrupts the backend driver's wait: a slot came back
        self.parked: list[Dispatch] = []  # refused for now, in call order (a plain list: looked at per call)
        self.feed: Feed | None = None  # the batch's feed, marked ``polling`` while a call is parked

    def run(self, d: Dispatch, stopped: bool) -> list[Event] | None:
        """``d``'s events if it ran (or was cancelled), or None if it is parked until its tool is admitted."""
        name = d.call.name
        if stopped:
            return [CallStarted(d.call.id, name), cancelled(d)]
        if not self._governance.gated(name):
            return self._run(d, None)
        if any(p.call.name == name for p in self.parked):  # call order: behind its tool's parked calls
            slot = None
        else:
            slot = self._governance.admit(name)
        if slot is None:
            self._park(d)
            return None
        return self._run(d, slot)

    def ready(self, stopped: bool) -> Iterator[list[Event]]:
        """The events of parked calls that may start now (run here, one by one), or, once ``stopped``,
        of every parked call as "cancelled"."""
        refused: set[str] = set()
        while True:
            d = next((p for p in self.parked if p.call.name not in refused), None)
            if d is None:
                break
            if stopped:
                self._unpark(d)
                yield [CallStarted(d.call.id, d.call.name), cancelled(d)]
                continue
            slot = self._governance.admit(d.call.name)
            if slot is None:
                refused.add(d.call.name)
                continue
            self._unpark(d)
            yield self._run(d, slot)

    def _park(self, d: Dispatch) -> None:
        self.parked.append(d)
        if self.feed is not None:
            self.feed.polling = True

    def _unpark(self, d: Dispatch) -> None:
        self.parked.remove(d)
        if self.feed is not None:
            self.feed.polling = bool(self.parked)

    def _run(self, d: Dispatch, slot: Slot | None) -> list[Event]:
        progress: list[Any] = []
        try:
            result = run_in_host(d, lambda _cid, value: progress.append(value))
        finally:
            if slot is not None:
                self._governance.release(slot)
                self._wake()  # a pool call of the same tool or group may wait for this slot
        return [CallStarted(d.call.id, d.call.name), *(CallProgress(d.call.id, v) for v in progress),
                CallFinished(d.call.id, result)]


__all__ = ["InlineCalls"]
