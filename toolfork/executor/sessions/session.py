"""Sessions: a state built once by a factory, and calls that run on it in order (``Executor.session``).

Why: stateful tools (a file system a model ``cd``s around in, an account, a game) need every call of
one episode to reach the same state, and a fault must never leave an episode going on silently on a
reset state. Where the state lives is the backend's (``Backend.open_session``, see
``backends.sessions``): fork, a process of its own forked by the template's sessions' supervisor
(``fork.session_link``), whose checkpoint, with ``checkpoint=True``, takes over after a crash or a
timeout; sequential, the host (``backends.sequential.HostPlace``); Ray refuses. What every session
shares is here: calls in order, one ``run`` at a time, the admission of each call (unknown tool,
timeout, caps), counting and tracing, a lost session never going on, and the bound on open sessions
(``Executor(max_sessions=...)``).

    Executor.session ──> open_session: bound? ──> Backend.open_session(SessionSpec) ──> SessionPlace
    Session.run(calls) ──> for each call, in order: unknown tool? timeout? caps ──> SessionPlace.call
                       ──> lost? restore or SessionLost ──> results in call order
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from toolfork.executor import metering, tracing
from toolfork.executor.backends.dispatch import Dispatch
from toolfork.executor.calls import CallBook
from toolfork.executor.closable import Closable
from toolfork.executor.sessions.place import (
    AFTER_RESULT,
    CHECKPOINTS,
    HostTools,
    ProcessGone,
    SessionPlace,
    SessionSpec,
    SessionUnavailable,
)
from toolfork.executor.types import ErrorInfo, ToolCall, ToolResult

if TYPE_CHECKING:
    from toolfork.executor.backends.base import Backend
    from toolfork.governance.limits import Limits
    from toolfork.governance.policy import Governance
    from toolfork.tools.tool import Tool


class Executor(Protocol):
    """What a session asks of its ``Executor``."""

    context: dict[str, Any]
    governance: Governance
    max_sessions: int

    @property
    def mode(self) -> str: ...

    @property
    def tools(self) -> dict[str, Tool]: ...

    @property
    def timeout(self) -> float | None: ...

    @property
    def backend(self) -> Backend: ...

    def dispatch_context(self) -> dict[str, Any]: ...

    def run(self, calls: Iterable[ToolCall]) -> list[ToolResult]: ...

    def merge_context(self, results: Iterable[ToolResult | None]) -> None: ...

    def counted(self) -> AbstractContextManager[dict[tuple[str, str], int]]: ...


class TooManySessions(RuntimeError):
    """``Executor.session`` would open more sessions than ``Executor(max_sessions=...)`` allows, or than the
    host's limit on open files has room for (each one holds a process and host descriptors): close one
    first, or raise the bound the message names."""


class SessionLost(RuntimeError):
    """A session's state is gone: a call crashed or timed out in it (without ``checkpoint=True``, or its
    checkpoint could not take over). Raised by every later ``run`` of the session; the calls after the
    lost one in the same ``run`` come back as errors of this type, not run."""

    def __init__(self, call_id: str, name: str, reason: str) -> None:
        self.call_id = call_id
        self.name = name
        self.reason = reason
        super().__init__(f"the session was lost at call {call_id!r} (tool {name!r}): {reason}; its state is "
                         "gone, so no later call of it runs (checkpoint=True restores the state instead)")


class Session(Closable):
    """A state and the calls that run on it, one at a time, in order (see ``Executor.session``)."""

    def __init__(self, executor: Executor, prepare: Callable[[Iterable[Any]], list[ToolCall]],
                 place: SessionPlace, limits: Limits | None = None) -> None:
        self._executor = executor
        self.limits = limits  # the sandbox the session's process entered when it opened (None: none)
        self._prepare = prepare
        self._place = place
        self._lock = threading.Lock()  # one run (or snapshot) at a time: its calls depend on each other
        self.lost: SessionLost | None = None
        self._runner: int | None = None  # the thread running calls on the state
        self.restores = 0  # faults the checkpoint took over from
        self.closed = False
        self._ended = False  # closed and its process gone: its place counts against max_sessions until then

    @property
    def pid(self) -> int | None:
        """The process that holds the state now (the host's pid for a sequential session)."""
        return self._place.pid

    def run(self, calls: Iterable[ToolCall | dict[str, Any]]) -> list[ToolResult]:
        """Run ``calls`` on the state, one after the other, in order; one result per call, in call order.
        Raises ``SessionLost`` if the session was lost before. Each call is traced (its ``execute_tool``
        span under the span current here) and counted (``Executor.stats()``, the metrics) as any call."""
        batch = self._prepare(calls)
        parent = tracing.capture()
        with self._lock, self._running():
            self._check()
            ex = self._executor
            tools = ex.tools
            spans = tracing.CallSpans() if parent is not None else None
            results: list[ToolResult] = []
            with ex.counted() as counts:
                # A sandboxed tool is refused (calls share one process), but in a sandboxed session whose
                # sandbox is the tool's own (the session's Limits laid over the tool's).
                refused = self._other_sandbox if self.limits is not None else \
                    ex.governance.restricted if ex.backend.capabilities.sandbox else None
                book = CallBook(ex.timeout, ex.dispatch_context(), counts, lambda: tools, spans=spans,
                                parent_of=None if spans is None else (lambda _call: parent),
                                recorder=metering.recorder(), one_process=refused)
                try:
                    for call in batch:
                        d = book.admit(call, tools.get(call.name))
                        if type(d) is not Dispatch:
                            result: ToolResult = d  # type: ignore[assignment]
                        elif self.lost is not None:
                            result = ToolResult(call.id, call.name, "error", error=ErrorInfo(
                                "SessionLost", str(self.lost)))
                        else:
                            result = self._one(d)  # type: ignore[arg-type]
                        book.finish(result)
                        results.append(result)
                finally:
                    book.close()
            ex.merge_context(results)  # in call order, as run() does
            return results

    async def arun(self, calls: Iterable[ToolCall | dict[str, Any]]) -> list[ToolResult]:
        """``run`` in a thread of the event loop's default executor, in this task's context (its
        current span is the calls' parent). Cancelling the task that awaits it stops the call running in
        the session's process (the process is killed, as ``acall`` kills a call's worker): the session is
        lost, since its state may be half changed. In sequential mode the call runs on in its thread."""
        import asyncio  # its caller's loop has imported it; a module-level import costs every process 15 ms

        here = contextvars.copy_context()
        mine: list[int] = []

        def run() -> list[ToolResult]:
            mine.append(threading.get_ident())
            return here.run(self.run, calls)

        try:
            return await asyncio.get_running_loop().run_in_executor(None, run)
        except asyncio.CancelledError:
            if mine and self._runner == mine[0]:
                self._place.interrupt()
            raise

    def snapshot(self) -> Any:
        """The state, rebuilt in the host (pickled in the session's process); raises what could not be sent.
        If sending it ended the session's process (a state whose pickling crashes), the checkpoint takes
        over (``checkpoint=True``: the state as it was, and ``RuntimeError`` says so) or the session is lost
        (``SessionLost``); either way no later call runs on a process that is gone."""
        with self._lock:
            self._check()
            try:
                return self._place.snapshot()
            except ProcessGone as gone:
                why = self._place.restore()
                if why is None:
                    self.restores += 1
                    raise RuntimeError(f"{gone}; its checkpoint took over, with the state as it was") from None
                self.lost = SessionLost("(snapshot)", "(snapshot)", str(gone) if why == "" else f"{gone} ({why})")
                raise self.lost from None

    def close(self) -> None:
        """End the session: its process (and checkpoint) go, its state with them. Safe to call twice, and
        from another thread while a call runs (that call is stopped: its result says so)."""
        if not self._lock.acquire(blocking=False):
            self._place.interrupt()
            self._lock.acquire()
        try:
            if not self.closed:
                self.closed = True
                try:
                    self._place.close()  # returns once its process is gone (or a bounded wait passed)
                finally:
                    self._ended = True
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def _running(self) -> Iterator[None]:
        """Which thread runs calls on the state now (``arun``'s cancel stops only its own)."""
        self._runner = threading.get_ident()
        try:
            yield
        finally:
            self._runner = None

    def __repr__(self) -> str:
        state = "closed" if self.closed else "lost" if self.lost is not None else "open"
        return f"<Session {state} pid={self.pid}>"

    def _check(self) -> None:
        if self.closed:
            raise RuntimeError("this session is closed")
        if self.lost is not None:
            raise self.lost

    def _other_sandbox(self, name: str) -> str | None:
        """Why tool ``name`` cannot run in this sandboxed session (None: it can): its own Limits ask for
        another sandbox than the session's (the session's fields win; a tool's fill in what it leaves), or
        for a bound of all the call's processes the session does not set."""
        session = self.limits
        assert session is not None
        merged = session.merged_over(self._executor.governance.limits_for(name))
        if merged.restriction_key != session.restriction_key:
            return (f"tool '{name}' was not run: its Limits ask for another sandbox than this session's "
                    f"({_sandbox_text(merged)} against {_sandbox_text(session)})")
        # what bounds every process of a call: the session's cgroup and keeper, set with the session
        own = [f"{f}={getattr(merged, f)!r}" for f in ("memory_mb", "cpu_s", "processes")
               if getattr(merged, f) is not None and getattr(session, f) is None]
        if own:
            return (f"tool '{name}' was not run: its Limits ask for {', '.join(own)}, which in a sandboxed session "
                    "bound the session's processes together: set them on the session's Limits")
        return None

    def _one(self, d: Dispatch) -> ToolResult:
        """One admitted call on the state: its cap, the call in the session's place, a fault's restore."""
        call = d.call
        governance = self._executor.governance
        slot = governance.acquire(call.name) if governance.gated(call.name) else None
        try:
            result, lost = self._place.call(call, d.tool, d.timeout, d.context, d.trace)
        finally:
            if slot is not None:
                governance.release(slot)
        if lost is not None:
            why = self._place.restore()
            if why is None:
                self.restores += 1
            else:
                self.lost = SessionLost(call.id, call.name, lost if why == "" else f"{lost} ({why})")
        return result


def _sandbox_text(limits: Limits) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in limits.set_fields().items() if k in ("network", "read_paths",
                                                                                   "write_paths", "sandbox", "env"))


def check_sandbox(limits: Any, backend: Backend) -> Limits:
    """A session's ``limits``, checked where it opens: Limits that ask for the sandbox, which this backend
    and this machine can give (else ``LimitsNotEnforceable``, naming why, as for a sandboxed tool at start)."""
    from toolfork.governance import cgroup, enforceable
    from toolfork.governance.limits import Limits

    if not isinstance(limits, Limits):
        raise TypeError(f"session(limits=...) takes a toolfork.Limits or None, got {type(limits).__name__}")
    if not limits.sandboxed:
        raise ValueError(f"session(limits={limits!r}): a session's limits are the sandbox its process enters, so they "
                         "must ask for it: sandbox=True, network=False, read_paths or write_paths")
    can = backend.capabilities
    nowhere = None if can.sandbox else can.refusal("sandbox")
    missing = enforceable.check(limits, where="session(limits=...)", nowhere=nowhere)
    said = cgroup.probe()
    asked = {"cpu_s": limits.cpu_s, "processes": limits.processes}
    without = [enforceable.Unenforceable(name, value, "a session's processes are counted together, per call for "
                                         f"cpu_s, by a cgroup, and no cgroup can be had here ({said.reason})")
               for name, value in asked.items() if value is not None and not said.ok
               and all(m.field != name for m in missing)]
    if without and limits.strict:
        raise enforceable.LimitsNotEnforceable("session(limits=...)", without)
    return limits


def open_session(executor: Executor, prepare: Callable[[Iterable[Any]], list[ToolCall]],
                 factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 checkpoint: bool | str, limits: Limits | None = None, host_tools: Iterable[str] = ()) -> Session:
    if not callable(factory):
        raise TypeError(f"session(factory, ...): the factory must be callable, got {type(factory).__name__}")
    _check_checkpoint(checkpoint)
    can = executor.backend.capabilities  # declared by the backend, read before it is asked
    if not can.sessions:
        raise SessionUnavailable(can.refusal("sessions"))
    host = _host_tools(executor, host_tools)
    if host is not None and not can.host_calls:
        raise SessionUnavailable(f"session(host_tools=...): {can.refusal('host_calls')}")
    if limits is not None:
        limits = check_sandbox(limits, executor.backend)
    with _OPEN_LOCK:
        live = _OPEN.setdefault(executor, weakref.WeakSet())
        if sum(1 for s in live if not s._ended) + _opening.get(id(executor), 0) >= executor.max_sessions:
            raise TooManySessions(
                f"{executor.max_sessions} sessions are open on this executor, its max_sessions: close one first "
                "(a session's process and descriptors go when it is closed), or raise Executor(max_sessions=...)")
        _opening[id(executor)] = _opening.get(id(executor), 0) + 1
    try:
        spec = SessionSpec(factory, args, kwargs, checkpoint, executor.timeout, tuple(executor.tools), limits, host)
        session = Session(executor, prepare, executor.backend.open_session(spec), limits)
    finally:
        with _OPEN_LOCK:
            _opening[id(executor)] -= 1
            if not _opening[id(executor)]:
                del _opening[id(executor)]
    with _OPEN_LOCK:
        live.add(session)
    return session


def _host_tools(executor: Executor, names: Iterable[str]) -> HostTools | None:
    """``host_tools`` as the session's ``HostTools`` (None: none), each name a str. A name need not be a
    tool yet (one added later with ``add_tools`` is found when it is called); an unknown one is the
    host call's error then, as any call's."""
    if isinstance(names, str):
        raise TypeError(f"session(host_tools=...): give a list of tool names, not the string {names!r}")
    wanted = list(names)
    bad = [n for n in wanted if not isinstance(n, str) or not n]
    if bad:
        raise TypeError(f"session(host_tools=...): tool names must be non-empty strings, got {bad[0]!r}")
    if not wanted:
        return None
    return HostTools(frozenset(wanted), lambda call: executor.run([call])[0])


def _check_checkpoint(checkpoint: Any) -> None:
    if not any(checkpoint is c or (type(checkpoint) is str and checkpoint == c) for c in CHECKPOINTS):
        raise ValueError(f"session(checkpoint={checkpoint!r}): give True, False or {AFTER_RESULT!r}")


def prepare_session(executor: Executor, factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                    checkpoint: bool | str, limits: Limits | None, on_discard: Callable[[], None] | None) -> bool:
    """``Executor.session_ahead``: the spec ``open_session`` would build, opened ahead by the backend where
    it can (not counted against ``max_sessions``: it runs no call until an open takes it)."""
    if not callable(factory):
        raise TypeError(f"session_ahead(factory, ...): the factory must be callable, got {type(factory).__name__}")
    _check_checkpoint(checkpoint)
    if not executor.backend.capabilities.sessions:
        return False
    if limits is not None:
        limits = check_sandbox(limits, executor.backend)
    spec = SessionSpec(factory, args, kwargs, checkpoint, executor.timeout, tuple(executor.tools), limits)
    return executor.backend.prepare_session(spec, on_discard)


_OPEN: weakref.WeakKeyDictionary[Any, weakref.WeakSet[Session]] = weakref.WeakKeyDictionary()  # Executor -> sessions
_opening: dict[int, int] = {}  # id(Executor) -> sessions being opened now (counted against the bound too)
_OPEN_LOCK = threading.Lock()


__all__ = ["Session", "SessionLost", "SessionUnavailable", "TooManySessions", "open_session", "prepare_session"]
