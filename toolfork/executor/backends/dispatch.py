"""A call as the host hands it to a backend: the ``Dispatch``, and ``WAIT`` in its place when a live
source has nothing yet.

Why a module of its own: the Executor (``calls.py`` makes each ``Dispatch``), every backend, the
``Hub`` and the line lane's worker core speak in these values; none of them is a backend or the
scheduler. ``Dispatch.item()`` is the call as the place it runs receives it (``wire.callitem``)::

    CallBook.admit ── Dispatch ──> Feed (hub.py) ──> backend ──> CallItem on the wire
                                                           └──> cancelled(d): its "cancelled" result
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from toolfork.executor.types import CallFinished, ErrorInfo, ToolCall, ToolResult
from toolfork.executor.wire.callitem import CallItem, TraceParent

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool


@dataclass(slots=True)
class Dispatch:
    """A call ready to run: its tool resolved and its effective timeout (None: unbounded)."""

    call: ToolCall
    tool: Tool
    timeout: float | None
    context: dict[str, Any] = field(default_factory=dict)
    requeues: int = 0  # times a worker died before it could start this call
    batch: Any = None  # its ``BatchState`` in a Hub (``hub.py``), where its events go
    stopped: bool = False  # its outcome is no longer wanted (a cancelled future): drop its result
    slot: Any = None  # its place under its tool's caps while sent (``Governance.admit``), else None
    trace: TraceParent | None = None  # its span, where the tool's own spans go (None: not traced)

    if TYPE_CHECKING:  # set below the class: what the worker core knows an item by

        @property
        def call_id(self) -> str: ...

        @property
        def name(self) -> str: ...

    def item(self) -> CallItem:
        """The call as the place it runs receives it (see ``wire.callitem``)."""
        return Dispatch.items((self,))[0]

    @staticmethod
    def items(chunk: Iterable[Dispatch]) -> list[CallItem]:
        """``item()`` of each, in one call: the fork pool sends a chunk of calls at a time."""
        return [(d.call.id, d.call.name, d.call.arguments, d.timeout, d.context or None, d.call.meta, d.trace)
                for d in chunk]


# What the fork pool's worker core knows an item by (a line lane's Line has the same two): read on every
# frame, so the getters are C functions (``operator.attrgetter``), not Python frames.
Dispatch.call_id = property(attrgetter("call.id"), doc="The call's id.")  # type: ignore[method-assign,assignment]
Dispatch.name = property(attrgetter("call.name"), doc="The tool's name.")  # type: ignore[method-assign,assignment]


class Wait:
    """The type of ``WAIT``."""

    def __repr__(self) -> str:
        return "WAIT"


#: A live source of calls yields WAIT when no call is available yet (a co-process whose client has
#: not written the next line): the backend keeps running what is in flight and asks again when the
#: source's wake-up fd becomes readable.
WAIT = Wait()


def cancelled(d: Dispatch, *, running: bool = False) -> CallFinished:
    """The result of a call stopped by ``Executor.cancel`` (``running``: it had started)."""
    how = "was stopped while running" if running else "was not started"
    return CallFinished(d.call.id, ToolResult(d.call.id, d.call.name, "cancelled", error=ErrorInfo(
        "Cancelled", f"tool '{d.call.name}' {how}: the batch was cancelled")))


__all__ = ["WAIT", "Dispatch", "Wait", "cancelled"]
