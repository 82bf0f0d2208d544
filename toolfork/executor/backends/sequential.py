"""The in-process backend: one call at a time in the calling thread.

It is what "auto" falls back to where fork is unavailable, and what an agent uses when parallel tool
calls are off. There is no child, so no hook runs. Timeouts are enforced with ``SIGALRM`` (raising
inside the tool) when the executor runs on the main thread; elsewhere Python offers no safe way to
stop a running function, so the call runs to its end and only then reports "timeout" if it overran:
with its real output attached and a message saying it ran to its end, so no caller mistakes it for a
call that did not happen (the agent goes further and lifts such timeouts, see agent/timeouts.py).

A session's state lives in the host (``HostPlace``), its calls run as the backend's calls do.

Caps and rate limits hold here too (several threads may run batches at once on one sequential
Executor): a call of a gated tool waits in its caller's thread for a slot and a token
(``Governance.acquire``) and gives the slot back when it ends. Limits cannot be applied to a call
in the host; the Executor refused them at construction unless they said enforce="best-effort".
"""

from __future__ import annotations

import copy
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from toolfork.executor import tracing
from toolfork.executor.backends.base import Backend
from toolfork.executor.backends.capabilities import Capabilities
from toolfork.executor.backends.dispatch import Dispatch, cancelled
from toolfork.executor.backends.hub import Feed, run_batch
from toolfork.executor.invoke import CallInterrupted, execute_call, timeout_result
from toolfork.executor.runtime import CallbackRuntime
from toolfork.executor.sessions.place import SessionSpec
from toolfork.executor.stats import Load
from toolfork.executor.types import CallFinished, CallProgress, CallStarted, Event, ToolResult
from toolfork.tools.output import ToolOutput
from toolfork.tools.runtime import SESSION_STATE

if TYPE_CHECKING:
    from toolfork.executor.types import ToolCall
    from toolfork.executor.wire.callitem import TraceParent
    from toolfork.governance.policy import Governance
    from toolfork.tools.tool import Tool


class HostPlace:
    """A session's state in the host (see ``backends.sessions``): calls run in the calling thread, as
    sequential calls do. With a checkpoint, the state is deep-copied before each call and put back
    after a timeout."""

    def __init__(self, spec: SessionSpec) -> None:
        self.state = spec.factory(*spec.args, **spec.kwargs)
        self.checkpoint = bool(spec.checkpoint)
        if spec.checkpoint:  # copied before each call: a state that cannot be is refused now, not at a call
            try:
                copy.deepcopy(self.state)
            except Exception as exc:
                raise TypeError(
                    f"checkpoint=True in sequential mode copies the state with copy.deepcopy before each call, "
                    f"and this state (a {type(self.state).__name__}) cannot be copied: {type(exc).__name__}: "
                    f"{exc} (fork mode copies it by forking; or open the session without a checkpoint)") from None
        self._saved: Any = None
        self.pid: int | None = os.getpid()

    def call(self, call: ToolCall, tool: Tool, timeout: float | None, context: dict[str, Any],
             trace: TraceParent | None) -> tuple[ToolResult, str | None]:
        if self.checkpoint:
            self._saved = copy.deepcopy(self.state)
        token = SESSION_STATE.set(self.state)
        try:
            result = run_in_host(Dispatch(call, tool, timeout, context, trace=trace), lambda *_: None)
        finally:
            SESSION_STATE.reset(token)
        if result.status == "timeout":  # interrupted part-way: the state may be half changed
            return result, "it timed out"
        return result, None

    def restore(self) -> str | None:
        if not self.checkpoint:
            return ""
        self.state = self._saved
        return None

    def interrupt(self) -> None:
        """A call in the host cannot be stopped from another thread: ``close`` waits for it."""

    def snapshot(self) -> Any:
        return pickle.loads(pickle.dumps(self.state))

    def close(self) -> None:
        self.state = self._saved = None


class SequentialBackend(Backend):
    capabilities = Capabilities(
        "sequential", in_host=True, kills_at_deadline=False, limits=False, sandbox=False, has_workers=False,
        recycles=False, sessions=True, host_calls=False, why_not={
            "host_calls": "sequential mode runs a session's calls in the host process already: its tools can "
                          "reach what the host reaches, so there are no host_tools to ask for",
            "kills_at_deadline": "sequential mode runs every call in the host process, where only the main "
                                 "thread can interrupt a call at its deadline",
            "limits": "sequential mode runs every call in the host process, where a call cannot be limited "
                      "(fork is unavailable or was turned off)",
            "recycles": "sequential mode has no workers to recycle",
            "sandbox": "sequential mode runs calls and sessions in the host process, which cannot enter the "
                       "sandbox"})

    def __init__(self, governance: Governance | None = None) -> None:
        self._governance = governance
        self._running: set[int] = set()  # the calls running now (ids of their Dispatch), from any thread

    def open_session(self, spec: SessionSpec) -> HostPlace:
        """A session's state in this process (the factory runs here, in the caller's thread)."""
        return HostPlace(spec)

    def load(self) -> Load:
        """No workers: ``busy`` is the number of calls running in the host now (one per thread)."""
        return Load(busy=len(self._running))

    def execute(self, feed: Feed) -> Iterator[Event]:
        def submit(events: list[Event]) -> int:
            d = feed.pull()
            if d is None:
                return 0
            progress: list[Any] = []
            self._running.add(id(d))
            try:
                result = run_in_host(d, lambda _cid, value: progress.append(value), self._governance,
                                     lambda: feed.cancelled)
            finally:
                self._running.discard(id(d))
            events.append(CallStarted(d.call.id, d.call.name))
            events.extend(CallProgress(d.call.id, value) for value in progress)
            events.append(CallFinished(d.call.id, result))
            return 1

        def wait(events: list[Event]) -> None:  # a call is finished before submit returns
            raise AssertionError("the sequential backend never waits")

        return run_batch(feed, submit, wait)


def run_in_host(d: Dispatch, on_progress: Any, governance: Governance | None = None,
                stopped: Callable[[], bool] = lambda: False) -> ToolResult:
    """Run one dispatch in this process, with a SIGALRM deadline where that is possible; a gated tool's
    call first waits for its slot and token (and comes back "cancelled" if ``stopped()`` while it waits)."""
    if d.trace is not None:  # the call's span is the current one while it runs (the tool's spans go under it)
        return tracing.run_traced(d.trace, lambda: _gated(d, on_progress, governance, stopped), collect=False)[0]
    return _gated(d, on_progress, governance, stopped)


def _gated(d: Dispatch, on_progress: Any, governance: Governance | None, stopped: Callable[[], bool]) -> ToolResult:
    if governance is None or not governance.gated(d.call.name):
        return _run_in_host(d, on_progress)
    slot = governance.acquire(d.call.name, stopped)
    if slot is None:
        return cancelled(d).result
    try:
        return _run_in_host(d, on_progress)
    finally:
        governance.release(slot)


def _run_in_host(d: Dispatch, on_progress: Any) -> ToolResult:
    runtime = None
    if d.tool.uses_runtime:  # as in a fork worker: a tool that takes no runtime never sees one
        deadline = None if d.timeout is None else time.monotonic() + d.timeout
        runtime = CallbackRuntime(d.call.id, d.tool.name, deadline, d.context, on_progress, d.call.meta)
    use_alarm = d.timeout is not None and threading.current_thread() is threading.main_thread()
    start = time.perf_counter()
    if not use_alarm:
        result = execute_call(d.tool, d.call.id, d.call.arguments, runtime, worker_pid=os.getpid())
        if d.timeout is not None and result.duration_s > d.timeout and result.status == "ok":
            return _timeout_result(d, result.duration_s, ran_to_end=True, output=result.output)
        return result

    def on_alarm(signum: int, frame: Any) -> None:
        raise CallInterrupted(f"deadline of {d.timeout}s passed")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(d.timeout or 0.0, 1e-6))
    try:
        return execute_call(d.tool, d.call.id, d.call.arguments, runtime, worker_pid=os.getpid())
    except CallInterrupted:
        return _timeout_result(d, time.perf_counter() - start, ran_to_end=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _timeout_result(d: Dispatch, duration: float, *, ran_to_end: bool, output: ToolOutput | None = None) -> ToolResult:
    how = ("it ran to its end, side effects included (no preemption off the main thread); its output is "
           "its real result") if ran_to_end else "it was interrupted"
    return timeout_result(d.call.id, d.call.name, d.timeout, how, pid=os.getpid(), duration=duration, output=output)


__all__ = ["SequentialBackend", "run_in_host"]
