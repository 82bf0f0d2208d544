"""The worker table's values: what one worker process is to the host, and what the core asks of a client.

A ``Worker`` is a row of the core's table (``fork.core.WorkerCore``): its channels (call pipe, result
pipe, side port for large frames), the items sent to it and not finished (``inflight``, the first one
running), its clock (``running_since``, ``deadline``: set by the core as each item starts, on the hot
path) and its slot (``lender``, a one-shot's). Its ``WorkerState`` is read off those fields, not stored,
so the hot path sets nothing more; ``rss_mb`` reads its resident set for recycling. A ``Client`` (the
pool, the lane) is the code whose items the workers run. These are values the core, its fault rules
(``fork.faults``), the template's care (``fork.template_care``) and both clients share; none of them
needs the others' code, so they sit below all of them.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from typing import Any, Protocol

from toolfork.executor.types import ToolResult
from toolfork.executor.wire import framing, oob
from toolfork.executor.wire.frames import Progress, ResultMessage
from toolfork.governance.verdict import STATM_RESIDENT, statm_bytes


class Client(Protocol):
    """What the core asks of the code whose items the workers run. An item is a pool's ``Dispatch`` or
    a lane's ``Line``: the core reads its ``call_id``, ``name`` and ``timeout`` and counts its
    ``requeues``, and leaves the rest to the client."""

    def progress(self, item: Any, msg: Progress) -> None:
        """A progress message of the running ``item``."""

    def finished(self, w: Worker, item: Any, msg: ResultMessage) -> float | None:
        """``item``'s own result message (taken off the worker): deliver it. Returns the call's duration
        for the estimate, or None when the frame says nothing of it."""

    def fail(self, item: Any, result: ToolResult) -> None:
        """``item`` ends with a result the host made (timeout, crash, a frame it could not read)."""

    def wanted(self, item: Any) -> bool:
        """Whether an item that never started should still run (not stopped, its batch still there)."""

    def put_back(self, items: list[Any]) -> None:
        """Items that never started (their worker stopped), in order: they go to the front of their queue."""


class WorkerState(enum.Enum):
    """What a worker is doing (``Worker.state``), read from its fields so the hot path sets nothing more."""

    FORKING = "forking"  # asked of the template; its pid not reported yet (work sent to it waits in its pipe)
    IDLE = "idle"  # nothing sent to it that has not finished: it may be in ``WorkerCore.idle``
    RUNNING = "running"  # ``inflight[0]`` runs (its deadline is ``deadline``); the rest wait in its pipe
    LENT = "lent"  # a one-shot runs in its slot (``one_shot.lender`` is it): it gets no work until that ends


class Worker:
    """One worker process as the host sees it: its channels, what it was sent, and its slot."""

    __slots__ = ("call_fd", "calls", "chunks", "deadline", "inflight", "lender", "pid", "reader", "result_fd", "room",
                 "running_since", "sandboxed", "side", "spawned_at", "wid")

    def __init__(self, wid: int, call_fd: int, result_fd: int, side: oob.SidePort) -> None:
        self.wid = wid
        # A one-shot worker (a fresh_process call) runs in the slot of this idle worker, which gets the
        # slot back when the one-shot is done.
        self.lender: Worker | None = None
        self.spawned_at = time.monotonic()
        self.pid: int | None = None
        self.call_fd = call_fd
        self.result_fd = result_fd
        self.side = side  # large frames, both ways, by memory file (see toolfork.executor.wire.oob)
        self.reader = framing.FrameReader(result_fd, side)
        self.inflight: deque[Any] = deque()  # items sent, not finished; [0] is the running one
        self.chunks: deque[int] = deque()  # sizes of the frames of items sent and not all finished, oldest first
        self.room: int | None = None  # bytes a frame may take waiting in the call pipe (see WorkerCore.pipe_room)
        self.running_since = 0.0  # time.monotonic() when the running item started (a result's started_at is wall time)
        self.deadline: float | None = None
        self.calls = 0  # items it settled (for max_calls_per_worker)
        self.sandboxed = False  # a one-shot for a sandboxed call: what it sends is data about that call

    def state(self, lent: bool = False) -> WorkerState:
        """Its state; ``lent``: whether a one-shot holds its slot (the core knows: ``WorkerCore.state_of``)."""
        if self.pid is None:
            return WorkerState.FORKING
        if self.inflight:
            return WorkerState.RUNNING
        return WorkerState.LENT if lent else WorkerState.IDLE


def rss_mb(pid: int | None) -> float:
    """A process's resident set in MiB (0 where it cannot be read: a worker gone is recycled anyway)."""
    if pid is None:
        return 0.0
    try:
        return statm_bytes(STATM_RESIDENT, pid) / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        return 0.0


__all__ = ["Client", "Worker", "WorkerState", "rss_mb"]
