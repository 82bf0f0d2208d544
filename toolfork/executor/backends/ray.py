"""The Ray backend, host side: each call is a Ray task, so a batch can spread over a cluster.

It keeps the executor's contract with Ray's own tools (see ``docs/ray.md``):

* Tools are ``ray.put`` once per executor (cloudpickle); a tool that cannot be pickled is refused when
  the executor is built, naming the tool, not when its first call fails on a remote node.
* At most ``workers`` tasks are in flight; Ray queues them until a CPU is free. A call's deadline
  therefore starts when its task *starts* (the task reports it through the ``Sink`` actor), so a call
  that waited for a CPU is not timed out for the wait.
* At the deadline the result is "timeout" at once; the task gets ``ray.cancel(force=False)`` (a
  KeyboardInterrupt inside the tool, so its ``finally`` blocks run), then ``ray.cancel(force=True)``
  (Ray kills the worker process) if it is still running ``kill_grace`` seconds later.
* A worker that dies mid-call (os._exit, a signal, the OOM killer) makes Ray raise
  ``WorkerCrashedError`` for that task only: the call is "crashed", the others go on. Tasks run with
  ``max_retries=0``: tools have side effects, so only the executor's own ``retries`` apply.
* Ray is started here only if nobody started it (``address`` None: a local instance), and shut down
  when the last executor that needed it closes; a Ray the program initialised itself is left alone.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from toolfork.executor.backends import ray_session
from toolfork.executor.backends.base import POLL_INTERVAL, Backend, Dispatch, Feed, Hooks, cancelled, run_batch
from toolfork.executor.types import CallFinished, CallProgress, CallStarted, ErrorInfo, Event, ToolResult

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool

CANCEL_POLL = 0.05  # how often a running batch looks for Executor.cancel()
PROGRESS_DRAIN_S = 10.0  # how long a finished call's progress messages may lag behind its result


class _Running:
    """One submitted task, as the host tracks it."""

    __slots__ = ("deadline", "dispatch", "early", "next_seq", "pid", "ref", "seen", "started", "submitted",
                 "token", "uses_sink")

    def __init__(self, dispatch: Dispatch, token: int, ref: Any, uses_sink: bool) -> None:
        self.dispatch = dispatch
        self.token = token
        self.ref = ref
        self.uses_sink = uses_sink
        self.submitted = time.monotonic()
        self.started: float | None = None
        self.deadline: float | None = None
        self.pid: int | None = None
        self.seen = 0  # progress messages received
        self.next_seq = 0  # the next progress value to yield
        self.early: dict[int, Any] = {}  # progress that arrived before an earlier value


class RayBackend(Backend):
    mode = "ray"

    def __init__(self, tools: dict[str, Tool], workers: int, hooks: Hooks, kill_grace: float = 1.0, *,
                 address: str | None = None, options: dict[str, Any] | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        ray = ray_session.import_ray()
        self._ray = ray
        self._size = workers
        self._kill_grace = kill_grace
        self._closed = False
        self._lock = threading.Lock()
        self._id = uuid.uuid4().hex
        self._tokens = itertools.count()
        self._tool_refs: dict[str, Any] = {}
        self._sink: Any = None
        self._take: Any = None  # the pending Sink.take() the host waits on
        self._dying: dict[Any, threading.Timer] = {}  # cancelled refs awaiting the force-kill
        ray_session.acquire(ray, address)
        try:
            from toolfork.executor.backends import ray_task

            opts = dict(options or {})
            if "num_cpus" not in opts:
                # ``workers`` is the number of calls in flight, as in the fork pool: share the cluster's
                # CPUs among them, or Ray would run only one task per CPU (its default is 1 CPU a task).
                opts["num_cpus"] = _cpu_share(ray.cluster_resources().get("CPU", 1.0), workers)
            self._task = ray.remote(max_retries=0, retry_exceptions=False, **opts)(ray_task.run_call)
            self._sink_class = ray.remote(ray_task.Sink)
            self._put_tools(tools.values())
            self._hooks_box = self._put_hooks(hooks)
            ray_session.shared_sink(ray, self._sink_class, wait=False)  # its process starts meanwhile
        except BaseException:
            ray_session.release(ray)
            raise

    # ----------------------------------------------------------------- tools and hooks

    def _put_tools(self, tools: Iterable[Tool]) -> None:
        """Pickle each tool once, here, so a tool that cannot cross to a worker is named at once."""
        refs: dict[str, Any] = {}
        for t in tools:
            if t.inline:  # runs in the host, never shipped
                continue
            try:
                refs[t.name] = self._ray.put(t)
            except Exception as exc:
                raise TypeError(
                    f"tool {t.name!r} cannot be sent to Ray workers: it cannot be serialized "
                    f"({_pickle_cause(t, exc)}). Ray ships tools pickled with cloudpickle: create locks, "
                    "sockets, open files and clients inside the call (or in on_worker_start) instead of "
                    "holding them in the tool, or use mode='fork', which needs no pickling."
                ) from exc
        self._tool_refs.update(refs)

    def _put_hooks(self, hooks: Hooks) -> tuple[Any] | None:
        """The hooks travel like the tools: pickled once, refused here (naming the hook) if they cannot be."""
        if hooks.before_child is None and hooks.after_child is None and hooks.on_worker_start is None:
            return None
        try:
            return (self._ray.put(hooks),)
        except Exception as exc:
            for label in ("before_child", "after_child", "on_worker_start"):
                hook = getattr(hooks, label)
                cause = _pickle_error(hook) if hook is not None else None
                if cause is not None:
                    name = getattr(hook, "__qualname__", None) or repr(hook)
                    raise TypeError(f"{label} hook {name} cannot be sent to Ray workers: it cannot be "
                                    f"serialized ({cause})") from exc
            raise TypeError(f"the hooks cannot be sent to Ray workers: {_first_line(exc)}") from exc

    def add_tools(self, tools: list[Tool]) -> None:
        self._put_tools(tools)

    # ----------------------------------------------------------------- batches

    def execute(self, feed: Feed) -> Iterator[Event]:
        if self._closed:
            raise RuntimeError("this executor is closed")
        running: dict[Any, _Running] = {}  # ref -> task
        by_token: dict[int, _Running] = {}

        def submit(events: list[Event]) -> int:
            pulled = 0
            while len(running) < self._size:
                d = feed.pull()
                if d is None:
                    break
                pulled += 1
                self._submit(d, running, by_token, events)
            return pulled

        def wait(events: list[Event]) -> None:
            # ray.wait can watch neither the live source's wake-up fd nor Executor.cancel's: with room
            # for more calls, ask the source again every POLL_INTERVAL; look for a cancel every 50 ms.
            poll = feed.waiting and len(running) < self._size
            self._wait(running, by_token, events, POLL_INTERVAL if poll else CANCEL_POLL)
            if poll:
                feed.drain_wakeup()
            if feed.cancelled:
                for ref, task in list(running.items()):
                    events.append(cancelled(task.dispatch, running=True))
                    self._stop(ref)
                running.clear()
                by_token.clear()

        try:
            yield from run_batch(feed, submit, wait)
        finally:
            if running:  # the consumer stopped early or the host was interrupted
                for task in running.values():
                    self._stop(task.ref)

    def _submit(self, d: Dispatch, running: dict[Any, _Running], by_token: dict[int, _Running],
                events: list[Event]) -> None:
        call, name = d.call, d.tool.name
        events.append(CallStarted(call.id, call.name))
        try:
            if name not in self._tool_refs:  # a tool object the front resolved but never registered here
                self._put_tools([d.tool])
            uses_sink = d.timeout is not None or d.tool.uses_runtime
            sink = self._ensure_sink() if uses_sink else None
            token = next(self._tokens)
            ref = self._task.remote(self._id, (name, self._tool_refs[name]), self._hooks_box, token, call.id,
                                    call.arguments, d.timeout, d.context or None, sink)
        except Exception as exc:
            events.append(CallFinished(call.id, ToolResult(call.id, call.name, "error", error=ErrorInfo(
                type(exc).__name__, f"call {call.id!r} of tool '{name}' could not be submitted to Ray: {exc}"))))
            return
        task = _Running(d, token, ref, uses_sink)
        running[ref] = task
        by_token[token] = task

    def _ensure_sink(self) -> Any:
        if self._sink is None:
            self._sink = ray_session.shared_sink(self._ray, self._sink_class, wait=True)
            self._take = self._sink.take.remote(self._id)
        return self._sink

    def _wait(self, running: dict[Any, _Running], by_token: dict[int, _Running], events: list[Event],
              poll: float | None = None) -> None:
        """Block until a task ends, a message arrives, a deadline passes or ``poll`` seconds went by;
        turn what happened into events."""
        ray = self._ray
        refs = list(running)
        if self._take is None:  # the sink was lost: what it would have said is gone with it
            for t in running.values():
                if t.uses_sink:
                    t.uses_sink = False
                    if t.started is None and t.dispatch.timeout is not None:  # count from submission
                        t.started = t.submitted
                        t.deadline = t.submitted + t.dispatch.timeout
        take = self._take if self._take is not None and any(t.uses_sink for t in running.values()) else None
        if take is not None:
            refs.append(take)
        deadlines = [t.deadline for t in running.values() if t.deadline is not None]
        timeout = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
        if poll is not None:
            timeout = poll if timeout is None else min(timeout, poll)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and len(refs) > 1:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        if take is not None and take in ready:
            self._handle_messages(self._take_messages(None), by_token, events)
        done = [running.pop(ref) for ref in ready if ref is not take]
        if done:
            for task, outcome in zip(done, self._outcomes(done), strict=True):
                result, sent = outcome
                if task.seen < sent:
                    self._drain(task, sent, by_token, events)
                for seq in sorted(task.early):  # only if a message was lost: yield what did arrive
                    events.append(CallProgress(task.dispatch.call.id, task.early[seq]))
                by_token.pop(task.token, None)
                events.append(CallFinished(task.dispatch.call.id, result))
        self._expire(running, by_token, events)

    # ----------------------------------------------------------------- messages from running calls

    def _take_messages(self, timeout: float | None) -> list[tuple[Any, ...]]:
        """The messages of the ready (or, with a timeout, soon ready) take; a new take is left pending."""
        ray = self._ray
        try:
            messages = ray.get(self._take, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            return []
        except ray.exceptions.RayError:  # the sink actor died (its node was lost): start another
            ray_session.drop_sink(self._sink)
            self._sink = self._take = None
            return []
        self._take = self._sink.take.remote(self._id)
        return list(messages)

    def _handle_messages(self, messages: list[tuple[Any, ...]], by_token: dict[int, _Running],
                         events: list[Event]) -> None:
        now_mono, now_wall = time.monotonic(), time.time()
        for msg in messages:
            task = by_token.get(msg[1])
            if task is None:  # a call that already timed out or was abandoned
                continue
            if msg[0] == "p":
                task.seen += 1
                task.early[msg[2]] = msg[3]
                while task.next_seq in task.early:
                    events.append(CallProgress(task.dispatch.call.id, task.early.pop(task.next_seq)))
                    task.next_seq += 1
            elif msg[0] == "s" and task.started is None:
                # The worker's wall clock says how long ago it started (exact on one machine, NTP-close
                # on a cluster); never earlier than the submission, never later than now.
                lag = min(max(0.0, now_wall - msg[2]), now_mono - task.submitted)
                task.started = now_mono - lag
                task.pid = msg[3]
                if task.dispatch.timeout is not None:
                    task.deadline = task.started + task.dispatch.timeout

    def _drain(self, task: _Running, sent: int, by_token: dict[int, _Running], events: list[Event]) -> None:
        """A call finished before the host saw all its progress: take messages until it has."""
        end = time.monotonic() + PROGRESS_DRAIN_S
        while task.seen < sent and self._take is not None:
            left = end - time.monotonic()
            if left <= 0:
                return
            self._handle_messages(self._take_messages(left), by_token, events)

    # ----------------------------------------------------------------- outcomes

    def _outcomes(self, done: list[_Running]) -> list[tuple[ToolResult, int]]:
        ray = self._ray
        try:  # one round trip for the usual case: every task returned normally
            return [(r, n) for r, n in ray.get([t.ref for t in done])]
        except Exception:
            pass
        outcomes = []
        for t in done:
            try:
                result, sent = ray.get(t.ref)
                outcomes.append((result, sent))
            except Exception as exc:
                outcomes.append((self._failure(t, exc), 0))
        return outcomes

    def _failure(self, task: _Running, exc: Exception) -> ToolResult:
        """Map what Ray raised for a task to the executor's statuses."""
        ex = self._ray.exceptions
        call = task.dispatch.call
        name = call.name
        duration = time.monotonic() - (task.started if task.started is not None else task.submitted)
        cause = getattr(exc, "cause", None) if isinstance(exc, ex.RayTaskError) else None
        detail = _first_line(exc)
        if isinstance(exc, ex.TaskCancelledError) or isinstance(cause, ex.TaskCancelledError):
            status, etype, message = "cancelled", "TaskCancelledError", \
                f"the Ray task of tool '{name}' was cancelled outside toolfork"
        elif isinstance(exc, ex.WorkerCrashedError):
            status, etype, message = "crashed", "WorkerCrashed", (
                f"tool '{name}' crashed: the Ray worker process died while running it (os._exit, a signal "
                "such as SIGSEGV or SIGKILL, or the OOM killer; Ray does not pass on the exit code or signal: "
                "the raylet's log of the node names it)")
        elif isinstance(exc, ex.OutOfMemoryError):
            status, etype, message = "crashed", "WorkerCrashed", \
                f"tool '{name}' crashed: Ray's memory monitor killed its worker ({detail})"
        elif isinstance(exc, (ex.NodeDiedError, ex.LocalRayletDiedError, ex.ObjectLostError)):
            status, etype, message = "crashed", "WorkerCrashed", \
                f"tool '{name}' crashed: the Ray node running it was lost ({type(exc).__name__}: {detail})"
        elif isinstance(exc, ex.RayTaskError):
            # run_call catches every Exception of the tool and its hooks: what is left is Ray failing to
            # serialize the value the task returned.
            why = f"{type(cause).__name__}: {cause}" if cause is not None else detail
            status, etype, message = "error", type(cause).__name__ if cause is not None else "RayTaskError", \
                f"the result of tool '{name}' could not be serialized to send it to the host: {why}"
        elif isinstance(exc, ex.RayError):
            status, etype, message = "error", type(exc).__name__, f"Ray could not run tool '{name}': {detail}"
        else:  # the result arrived but cannot be unpickled here
            status, etype, message = "error", type(exc).__name__, \
                f"the result of tool '{name}' could not be deserialized in the host: {exc}"
        return ToolResult(call.id, name, status, error=ErrorInfo(etype, message),  # type: ignore[arg-type]
                          duration_s=duration, worker_pid=task.pid)

    def _expire(self, running: dict[Any, _Running], by_token: dict[int, _Running], events: list[Event]) -> None:
        now = time.monotonic()
        for ref, task in list(running.items()):
            if task.deadline is None or now < task.deadline:
                continue
            del running[ref]
            by_token.pop(task.token, None)
            call = task.dispatch.call
            grace = f"; its worker is killed if the tool has not stopped {self._kill_grace}s later" \
                if self._kill_grace > 0 else "; its worker was killed"
            events.append(CallFinished(call.id, ToolResult(
                call.id, call.name, "timeout", worker_pid=task.pid,
                duration_s=now - (task.started if task.started is not None else task.submitted),
                error=ErrorInfo("TimeoutError", f"tool '{call.name}' did not finish within its timeout of "
                                f"{task.dispatch.timeout}s; its Ray task was cancelled{grace}"),
            )))
            self._stop(ref)

    # ----------------------------------------------------------------- stopping tasks

    def _stop(self, ref: Any) -> None:
        """Interrupt a task (KeyboardInterrupt inside the tool), kill its worker after the grace period."""
        if self._kill_grace <= 0:
            self._kill(ref)
            return
        try:
            self._ray.cancel(ref, force=False)
        except Exception:
            pass
        timer = threading.Timer(self._kill_grace, self._grace_over, (ref,))
        timer.daemon = True
        with self._lock:
            if self._closed:
                return
            self._dying[ref] = timer
        timer.start()

    def _grace_over(self, ref: Any) -> None:
        with self._lock:
            if self._dying.pop(ref, None) is None:  # close() took it over
                return
        self._kill(ref)

    def _kill(self, ref: Any) -> None:
        """``ray.cancel(force=True)``: Ray kills the worker process if the task is still running."""
        ray = self._ray
        try:
            ready, _ = ray.wait([ref], timeout=0)
            if not ready:
                ray.cancel(ref, force=True)
        except Exception:  # Ray already shut down, or the task ended meanwhile
            pass

    # ----------------------------------------------------------------- shutdown

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            dying = list(self._dying.items())
            self._dying.clear()
        ray = self._ray
        for ref, timer in dying:
            timer.cancel()
            self._kill(ref)
        if self._sink is not None:
            try:
                self._sink.close.remote(self._id)  # lets the pending take return
            except Exception:
                pass
            self._sink = self._take = None
        self._tool_refs.clear()
        ray_session.release(ray)


def _cpu_share(total: float, workers: int) -> float:
    """CPUs per task so that ``workers`` tasks fit at once (Ray wants whole numbers above 1)."""
    share = total / workers
    return float(int(share)) if share >= 1 else max(0.0001, round(share, 4))


def _pickle_error(obj: Any) -> str | None:
    """Why cloudpickle refuses ``obj`` in one line, or None if it does not."""
    try:
        from ray import cloudpickle

        cloudpickle.dumps(obj)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _pickle_cause(obj: Any, exc: BaseException) -> str:
    """The one-line reason (Ray's own message is a page of diagnostics)."""
    return _pickle_error(obj) or _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["RayBackend"]
