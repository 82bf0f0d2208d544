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

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolfork.executor.types import Event, ToolCall

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool

Hook = Callable[[], Any]


@dataclass(slots=True)
class Dispatch:
    """A call ready to run: its tool resolved and its effective timeout (None: unbounded)."""

    index: int
    call: ToolCall
    tool: Tool
    timeout: float | None
    context: dict[str, Any] = field(default_factory=dict)


class Feed:
    """Dispatches pulled lazily by a backend, with backpressure from whoever consumes the results.

    The source yields ``Dispatch`` items, or ready-made events (an unknown tool's error, an inline
    call's result) that the backend passes on through ``immediate``. ``room()`` says whether the
    consumer can take more (imap's window); None means always.
    """

    __slots__ = ("_retry", "_room", "_source", "exhausted", "immediate", "size_hint")

    def __init__(self, source: Iterable[Dispatch | Event], room: Callable[[], bool] | None = None,
                 size_hint: int | None = None) -> None:
        self._source: Iterator[Dispatch | Event] = iter(source)
        self._room = room
        self.size_hint = size_hint
        self.exhausted = False
        self.immediate: list[Event] = []
        self._retry: list[Dispatch] = []

    def retry(self, dispatch: Dispatch) -> None:
        """Run ``dispatch`` again (a tool that declares ``retries``); it goes before new calls."""
        self._retry.append(dispatch)
        self.exhausted = False

    def pull(self) -> Dispatch | None:
        """The next dispatch, or None when the source is exhausted or the consumer has no room."""
        if self._retry:
            return self._retry.pop(0)
        while not self.exhausted and (self._room is None or self._room()):
            item = next(self._source, None)
            if item is None:
                self.exhausted = True
                return None
            if isinstance(item, Dispatch):
                return item
            self.immediate.append(item)
        return None

    def take_immediate(self) -> list[Event]:
        events, self.immediate = self.immediate, []
        return events


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

    def close(self) -> None:  # noqa: B027 - in-process backends hold nothing
        """Release workers; must leave no process behind and be safe to call twice."""


__all__ = ["Backend", "Dispatch", "Feed", "Hooks"]
