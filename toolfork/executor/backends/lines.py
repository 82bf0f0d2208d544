"""The line lane, as a backend offers it: ``toolfork run``'s lines go to workers without becoming
``ToolCall`` objects in the host.

Why a module of its own: the lane is a capability (``Capabilities.lines``), reached through
``Backend.open_lane``; the job that uses it (``commands/_lane_job.py``) needs the value it hands the
lane (``Line``), the lane's interface (``Lane``) and the rule for which jobs may take it (``fits``),
never the backend that implements it (``backends/fork/lane.py``)::

    LaneJob ── Line ──> Lane.ready ──> (the backend's workers) ──> Line.out ──> LaneJob
             <── Lane.mismatched: lines that were not the call the job took them for
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from toolfork.governance.policy import Governance
    from toolfork.tools.tool import Tool


@dataclass(slots=True, eq=False)
class Line:
    """One input line on its way through the lane; the Job keeps it in its output slot.

    ``raw`` is the line while nobody has checked that it is the call the host took it for (the worker
    parses it); None once checked, or for a line the host read itself (then ``arguments`` is set).
    ``out`` stays None until the line is settled: the worker's encoded output line (bytes), a
    ``ToolResult`` (an error, timeout or crash: the Job makes its record) or a record the Job made.
    """

    lineno: int
    call_id: str
    name: str
    raw: bytes | None
    arguments: dict[str, Any] | None
    timeout: float | None
    out: Any = None
    requeues: int = 0  # times a worker died before it could start this line
    meta: dict[str, str] | None = None  # the call's ``meta``, for a line the host read itself


class Lane(Protocol):
    """What a job sees of a lane (single-threaded: the job calls ``step`` between reading lines and
    writing records). Used as a context manager: it holds the backend's workers while it runs and gives
    them back idle, whatever ended the job."""

    ready: deque[Line]  # lines to send, in input order (requeued ones at the front)
    mismatched: list[Line]  # lines a worker sent back: the job reads them and decides again
    before_send: Callable[[list[Line]], None] | None  # called with each chunk right before it is sent

    def __enter__(self) -> Lane: ...

    def __exit__(self, *exc: object) -> None: ...

    @property
    def busy(self) -> bool:
        """Lines ready or in flight."""

    def step(self, wait: bool, wakeup_fd: int | None = None, poll: bool = False) -> None:
        """Start lines, take what the workers sent; block until something happens if ``wait``."""


def fits(tools: Iterable[Tool], governance: Governance) -> bool:
    """Whether a job with these tools can take the lane: none of them needs the general path (inline
    tools run in the host; ``fresh_process``, sandboxed and gated tools need a process each or wait
    in the Hub's capped queues; ``retries`` are the Executor's)."""
    alone = governance.alone
    return all(not (t.inline or t.fresh_process or t.retries or t.name in alone) for t in tools)


__all__ = ["Lane", "Line", "fits"]
