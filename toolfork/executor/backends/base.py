"""What a backend is: something that runs prepared calls and reports events as they happen.

The ``Executor`` front does everything that does not depend on where a call runs (``calls.py``: tools,
unknown names, effective timeouts, the journal, spans; then inline tools, ordering, context merging); a
backend only turns ``Dispatch`` items into events. It pulls them from a ``Feed`` (``hub.py``) as it has
room, so a batch job of a million lines never sits in memory at once. Contract for ``execute``: yield
``CallStarted`` / ``CallProgress`` / ``CallFinished`` in completion order, exactly one ``CallFinished``
per dispatch pulled (a ``CallStarted`` may be left out when the feed says ``starts=False``), pass on
the feed's ``immediate`` events (results the front made itself), and never raise because a tool
failed. If the consumer stops early (``GeneratorExit``) the backend stops and kills what is still
running.

Any number of ``execute`` generators may be live at once on one backend: from several threads, from
asyncio hosts (each batch in a thread of its own), or nested in one thread (a batch started while
another is being iterated). A backend with shared workers runs them through a ``Hub`` (``hub.py``);
one that runs a batch by itself loops in ``hub.run_batch``.

What a backend can do (stop a call at its deadline, enforce ``Limits``, recycle workers, host sessions,
run a job's lines) it declares as ``capabilities`` (a class attribute, see ``capabilities.py``): the
Executor, its governance, sessions, the commands and the agent decide from that, never from ``mode``,
which only names the backend for the user who chooses it. ``backend_class(mode)`` is the one place a
mode picks a backend, so nothing outside ``backends/`` imports one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from toolfork.executor.backends.capabilities import Capabilities
from toolfork.executor.invoke import error_info
from toolfork.executor.stats import Load

if TYPE_CHECKING:
    from toolfork.executor.backends.hub import Feed, Hub
    from toolfork.executor.backends.lines import Lane
    from toolfork.executor.sessions.place import SessionPlace, SessionSpec
    from toolfork.executor.types import ErrorInfo, Event, ToolResult
    from toolfork.governance.limits import Limits
    from toolfork.tools.tool import Tool

Hook = Callable[[], Any]


@dataclass(slots=True)
class WorkerSetup:
    """What every worker is set up with, whatever the backend: the user's hooks around each call, the
    result encoder and the default limits (not only hooks, hence the name)."""

    before_child: Hook | None = None
    after_child: Hook | None = None
    on_worker_start: Hook | None = None
    # Executor(encode_results=...): run in the fork worker on each clean ok result (see ToolResult.encoded).
    encode_result: Callable[[ToolResult], bytes | None] | None = None
    # Executor(limits=...): the default a tool's own limits go over, in the worker (Governance.default).
    limits: Limits | None = None

    def start_worker(self) -> ErrorInfo | None:
        """Run ``on_worker_start`` where a worker starts; the error every call there gets if it failed
        (the worker stays up and fails each call, naming the hook: starting it again would only fail
        again, in a loop)."""
        if self.on_worker_start is None:
            return None
        try:
            self.on_worker_start()
        except Exception as exc:
            return error_info(exc, prefix="on_worker_start hook failed")
        return None


class Backend(ABC):
    """A place where calls run. Subclasses set ``capabilities`` (what it can do, which every decision
    about it reads); its ``name`` is the backend's ``mode`` (its name for the user)."""

    mode: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("capabilities")
        if declared is not None:
            cls.mode = declared.name

    def add_tools(self, tools: list[Tool]) -> None:  # noqa: B027 - optional for in-process backends
        """Make tools registered after start reachable where calls run."""

    @abstractmethod
    def execute(self, feed: Feed) -> Iterator[Event]:
        """Run what ``feed`` gives; yield events in completion order (see module docstring)."""

    def wake(self) -> None:  # noqa: B027 - backends that never block in a wait need nothing
        """Interrupt a wait from another thread, so the batch notices what changed."""

    def cancel(self, feed: Feed) -> None:
        """After ``feed.cancel()`` or ``feed.stop(call)``: stop what runs of that batch."""
        self.wake()

    def open_lane(self, parse: Callable[[bytes, int], Any], context: dict[str, Any] | None) -> Lane:
        """The line lane (``lines.py``) on this backend's workers, where ``capabilities.lines`` says it
        has one: ``parse(raw, lineno)`` reads a line where it runs; ``context`` is every call's. The lane is
        a fast path, never a refusal: a job on a backend without it takes the general path, so asking
        anyway is a caller's mistake, said as such."""
        raise RuntimeError(f"the {self.capabilities.name} backend has no line lane (capabilities.lines is "
                           "False): run the job's calls through Executor.run instead")

    def load(self) -> Load:
        """Its workers now, for ``Executor.stats()`` (any thread; a snapshot, never waits)."""
        return Load()

    def open_session(self, spec: SessionSpec) -> SessionPlace:
        """A place for one session's state (see ``backends.sessions``); a backend without sessions refuses,
        in the words of its ``Capabilities``."""
        from toolfork.executor.sessions.place import SessionUnavailable

        raise SessionUnavailable(self.capabilities.refusal("sessions"))

    def prepare_session(self, spec: SessionSpec, on_discard: Callable[[], None] | None = None) -> bool:
        """Open a session of ``spec`` ahead, so that the next ``open_session`` of an equal spec finds it
        open; ``on_discard`` is called once if it is let go unused. False: this backend does not (nothing
        is kept, ``on_discard`` is never called)."""
        return False

    def close(self) -> None:  # noqa: B027 - in-process backends hold nothing
        """Release workers; must leave no process behind and be safe to call twice."""


class HubBackend(Backend):
    """A backend whose workers every batch shares (the fork pool, Ray): each batch runs through its one
    ``Hub`` (``self._hub``), and a cancel is a request to the Hub's driver."""

    _hub: Hub

    def execute(self, feed: Feed) -> Iterator[Event]:
        if self._hub.closed:  # its close() has begun (``Hub.closing``)
            raise RuntimeError("this executor is closed")
        return self._hub.execute(feed)

    def cancel(self, feed: Feed) -> None:
        self._hub.request(feed)


__all__ = ["Backend", "Hook", "HubBackend", "WorkerSetup"]
