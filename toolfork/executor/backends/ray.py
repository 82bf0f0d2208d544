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
* Rate limits hold where the tool starts: the driver admits a rate-limited call at its tool's rate
  (so a waiting call holds no Ray worker), and its task takes its token again from the ``Sink`` actor
  before the tool starts (Ray may start tasks admitted apart together; see ray_task).
* A worker that dies mid-call (os._exit, a signal, the OOM killer) makes Ray raise
  ``WorkerCrashedError`` for that task only: the call is "crashed", the others go on. Tasks run with
  ``max_retries=0``: tools have side effects, so only the executor's own ``retries`` apply.
* Any number of batches run at once (threads, asyncio hosts, nested batches): they go through the
  backend's ``Hub`` (see ``base.py``), so whichever batch's owner needs progress drives the backend for
  all of them: it takes calls from the batches in turn (round-robin, one call per turn) while fewer
  than ``workers`` tasks of this executor are in flight, waits once, and routes each event to the batch
  of its call. ``ray.wait`` cannot watch a pipe, so ``wake()`` (another owner pulled calls, a batch was
  cancelled) is a message on the sink the driver already waits on; without a sink it polls.
* ``cancel(feed)`` stops that batch's tasks alone (or, for a cancelled ``submit`` future, that call
  alone), as at a deadline, and reports them "cancelled"; ``close()`` does that for every live batch,
  waits out the grace, force-kills what is left and waits until Ray has killed it.
* A session (``Executor.session``) is a Ray actor of its own, its state built in it by the factory and
  its calls the actor's method calls (``ray_actor``): ``open_session`` makes one per session.
* Ray is started here only if nobody started it (``address`` None: a local instance), and shut down
  when the last executor that needed it closes; a Ray the program initialised itself is left alone.
"""

from __future__ import annotations

import itertools
import select
import threading
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from toolfork.executor import tracing
from toolfork.executor.backends import ray_connection
from toolfork.executor.backends.base import HubBackend, WorkerSetup
from toolfork.executor.backends.capabilities import Capabilities
from toolfork.executor.backends.dispatch import Dispatch
from toolfork.executor.backends.hub import POLL_INTERVAL, BatchState, Hub
from toolfork.executor.invoke import timeout_result
from toolfork.executor.stats import Load
from toolfork.executor.types import CallFinished, CallProgress, CallStarted, ErrorInfo, Event, ToolResult

if TYPE_CHECKING:
    from toolfork.executor.backends.ray_actor import ActorHost, ActorPlace
    from toolfork.executor.sessions.place import SessionSpec
    from toolfork.governance.policy import Governance
    from toolfork.tools.tool import Tool

CANCEL_POLL = 0.05  # how often the driver looks for new calls and cancel requests when wake() cannot reach it
KILL_WAIT_S = 5.0  # how long close() waits for Ray to kill the workers of tasks that ignored the interrupt
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


class RayBackend(HubBackend):
    capabilities = Capabilities(
        "ray", in_host=False, kills_at_deadline=True, limits=False, sandbox=False, has_workers=True,
        recycles=False, sessions=True, host_calls=False, why_not={
            "host_calls": "Ray mode's sessions are Ray actors, which have no line back to the host's pool "
                          "(use mode='fork' for host_tools)",
            "limits": "Ray mode runs calls in Ray's own worker processes, which Ray's threads and other tasks "
                      "share: a limit there would bind Ray too, and the CPU limit's signal would kill Ray's "
                      "worker (use mode='fork' for limits)",
            "recycles": "Ray mode runs calls in Ray's own workers (use Ray's max_calls option in ray_options "
                        "instead)",
            "sandbox": "Ray mode runs calls and sessions in Ray's own worker processes, which cannot enter the "
                       "sandbox"})

    def __init__(self, tools: dict[str, Tool], workers: int, hooks: WorkerSetup, kill_grace: float = 1.0, *,
                 address: str | None = None, options: dict[str, Any] | None = None,
                 governance: Governance | None = None) -> None:
        from toolfork.governance.policy import Governance

        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        # Caps and rate limits: a call waits in its batch's capped queue (Hub.take_next) until it may
        # start, and its slot goes back when its task is forgotten (finished, timed out, stopped).
        self._governance = governance if governance is not None else Governance(self.capabilities)
        ray = ray_connection.import_ray()
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
        self._closing = False  # close() has begun: the driver cancels everything and lets go
        # Every batch's tasks, driven through the hub (only the driver, holding Hub.drive, touches these).
        self._running: dict[Any, _Running] = {}  # ref -> task
        self._by_token: dict[int, _Running] = {}
        self._hub = Hub(self)
        self._actors: ActorHost | None = None  # the sessions' actors, made with the first session
        ray_connection.acquire(ray, address)
        try:
            from toolfork.executor.backends import ray_task

            opts = dict(options or {})
            self._runtime_env = opts.get("runtime_env")  # the sessions' actors import what the tasks do
            if "num_cpus" not in opts:
                # ``workers`` is the number of calls in flight, as in the fork pool: share the cluster's
                # CPUs among them, or Ray would run only one task per CPU (its default is 1 CPU a task).
                opts["num_cpus"] = _cpu_share(ray.cluster_resources().get("CPU", 1.0), workers)
            self._task = ray.remote(max_retries=0, retry_exceptions=False, **opts)(ray_task.run_call)
            self._sink_class = ray.remote(ray_task.Sink)
            self._put_tools(tools.values())
            self._hooks_box = self._put_hooks(hooks)
            ray_connection.shared_sink(ray, self._sink_class, wait=False)  # its process starts meanwhile
        except BaseException:
            ray_connection.release(ray)
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

    def _put_hooks(self, hooks: WorkerSetup) -> tuple[Any] | None:
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
            raise TypeError(f"the hooks cannot be sent to Ray workers: {ray_connection.first_line(exc)}") from exc

    def add_tools(self, tools: list[Tool]) -> None:
        self._put_tools(tools)

    def _tool_box(self, tool: Tool) -> tuple[str, Any]:
        """A tool as a task or an actor gets it: its name and its reference, unresolved (put once)."""
        if tool.name not in self._tool_refs:  # a tool object the front resolved but never registered here
            self._put_tools([tool])
        return tool.name, self._tool_refs[tool.name]

    # ----------------------------------------------------------------- sessions

    def open_session(self, spec: SessionSpec) -> ActorPlace:
        """A session's state in a Ray actor of its own (see ``ray_actor``); the factory runs there."""
        from toolfork.executor.backends.ray_actor import ActorHost, ActorPlace

        with self._lock:
            if self._closed or self._closing:
                raise RuntimeError("this executor is closed")
            if self._actors is None:
                self._actors = ActorHost(self._ray, self._id, self._tool_box, self._hooks_box, self._runtime_env)
            actors = self._actors
        return ActorPlace(actors, spec)

    # ----------------------------------------------------------------- batches

    def wake(self) -> None:
        """Interrupt the driver's ``ray.wait`` (any thread): a message on the sink makes the pending take
        return. Without a sink yet, the driver notices within ``CANCEL_POLL``."""
        sink = self._sink
        if sink is None or self._take is None:
            return
        try:
            sink.put.remote(self._id, ("w", None))
        except Exception:  # Ray is going away: the poll still notices
            pass

    def hub_round(self) -> None:
        """One turn of the driver (``Hub.drive`` held): start tasks from the batches in turn, wait once,
        route what happened to each batch, expire deadlines, settle cancel and stop requests."""
        if self._closed:
            raise RuntimeError("this executor is closed")
        hub = self._hub
        stops, starts, live, shared = hub.locked(self._begin_round, wake=False)
        self._stop_all(stops)
        if starts is None:
            return
        if shared and self._take is None:  # other owners pull and cancel: let their wake() reach us
            try:
                self._ensure_sink()
            except Exception:  # no sink: the poll below still notices them
                pass
        out: list[tuple[Dispatch, Event]] = []
        for d in starts:
            self._submit(d, out)
        if out:  # their CallStarted events are news: deliver them now, do not wait for more
            hub.locked(lambda: self._route(out))
            out.clear()
        # ray.wait watches neither a live source's wake-up fd nor the threads that pull, cancel or
        # close: wake() reaches it through the sink when there is one; else it polls.
        poll = 0.0 if starts else POLL_INTERVAL if live else CANCEL_POLL
        if self._governance.any_gated:  # a call waiting for a token: look again when it is due
            due = hub.locked(lambda: self._governance.wake_at(hub.capped_tools()), wake=False)
            if due is not None:
                poll = min(poll, max(0.0, due - time.monotonic()))
        self._wait(out, poll)
        self._stop_all(hub.locked(lambda: self._end_round(out, live)))

    def _begin_round(self) -> tuple[list[Any], list[Dispatch] | None, list[BatchState], bool]:
        """Inside ``Hub.locked``: (tasks to stop, dispatches to start or None when closing, the live
        batches, whether other owners share the Hub)."""
        hub = self._hub
        if self._closing:  # close() waits for the driver: end every batch's calls and let go
            stops = self._cancel_all()
            hub.wake_owners()
            return stops, None, [], False
        stops = self._settle() if hub.pending else []
        starts = self._take_ready()
        room = len(self._running) + len(starts) < self._size
        live = hub.to_watch() if room else []
        return stops, starts, live, len(hub.batches) > 1

    def _end_round(self, out: list[tuple[Dispatch, Event]], live: list[BatchState]) -> list[Any]:
        """Inside ``Hub.locked``: route what came, poke live batches, settle; the tasks to stop."""
        self._route(out)
        for b in live:
            if b.feed.wakeup_fd is None or _readable(b.feed.wakeup_fd):
                b.poked = True  # its owner empties the fd and asks the source again (see Hub.execute)
        stops = self._settle() if self._hub.pending else []
        if self._closing:
            stops += self._cancel_all()
        return stops

    def load(self) -> Load:
        """Tasks in flight of at most ``workers``, and calls not yet sent (any thread; a snapshot)."""
        busy = min(len(self._running), self._size)
        return Load(self._size, busy, self._size - busy, self._hub.queued())

    def next_deadline(self) -> float | None:
        """Not watched by the Hub: a Ray task keeps its own deadline where it runs (see ray_task)."""
        return None

    def hub_tend(self) -> None:
        self.hub_settle()

    def hub_settle(self) -> None:
        self._stop_all(self._hub.locked(self._settle))

    def _take_ready(self) -> list[Dispatch]:
        """Dispatches to start now, one per batch in turn while there is room (inside ``Hub.locked``)."""
        starts: list[Dispatch] = []
        take = self._hub.take_next
        admit = self._governance.admits if self._governance.any_gated else None
        while len(self._running) + len(starts) < self._size:
            taken = take(admit)
            if taken is None:
                break
            starts.append(taken[1])
        return starts

    @staticmethod
    def _route(out: list[tuple[Dispatch, Event]]) -> None:
        """Hand events to their batches (inside ``Hub.locked``), by the Hub's rule."""
        for d, event in out:
            Hub.route(d, event)

    def _forget(self, ref: Any) -> _Running:
        task = self._running.pop(ref)
        self._by_token.pop(task.token, None)
        self._governance.give_back(task.dispatch)
        return task

    def _settle(self) -> list[Any]:
        """Act on cancelled, stopped and abandoned batches (inside ``Hub.locked``) by the Hub's rule: their
        running tasks are forgotten and returned, for the caller to stop once the Hub's lock is let go."""
        stops: list[Any] = []

        def placed(b: BatchState) -> list[tuple[Dispatch, bool]]:
            return [(t.dispatch, True) for t in self._running.values() if t.dispatch.batch is b]

        def kill(stopped: list[Dispatch]) -> None:
            ids = {id(d) for d in stopped}
            for ref, task in list(self._running.items()):
                if id(task.dispatch) in ids:
                    self._forget(ref)
                    stops.append(ref)

        self._hub.settle(placed, kill)
        return stops

    def _cancel_all(self) -> list[Any]:
        """Closing (inside ``Hub.locked``): every running task and every call not started of every live batch
        is reported "cancelled"; the running tasks are returned for the caller to stop."""
        placed = [(t.dispatch, True) for t in self._running.values()]
        for d, _ in placed:
            self._governance.give_back(d)
        stops = list(self._running)
        self._running.clear()
        self._by_token.clear()
        self._hub.cancel_everything(placed)
        return stops

    def _stop_all(self, refs: list[Any]) -> None:
        for ref in refs:
            self._stop(ref)

    def _submit(self, d: Dispatch, out: list[tuple[Dispatch, Event]]) -> None:
        call, name = d.call, d.tool.name
        out.append((d, CallStarted(call.id, call.name)))
        try:
            tool_box = self._tool_box(d.tool)
            limit = self._governance.rate_of(name) if d.slot is not None else None
            rate = None if limit is None else (limit.per_second, limit.burst)
            uses_sink = d.timeout is not None or d.tool.uses_runtime or rate is not None
            sink = self._ensure_sink() if uses_sink else None
            token = next(self._tokens)
            ref = self._task.remote(self._id, tool_box, self._hooks_box, token, d.item(), sink, rate)
        except Exception as exc:
            self._governance.give_back(d)
            out.append((d, CallFinished(call.id, ToolResult(call.id, call.name, "error", error=ErrorInfo(
                type(exc).__name__, f"call {call.id!r} of tool '{name}' could not be submitted to Ray: {exc}")))))
            return
        task = _Running(d, token, ref, uses_sink)
        self._running[ref] = task
        self._by_token[token] = task

    def _ensure_sink(self) -> Any:
        if self._sink is None:
            self._sink = ray_connection.shared_sink(self._ray, self._sink_class, wait=True)
            self._take = self._sink.take.remote(self._id)
        return self._sink

    def _wait(self, out: list[tuple[Dispatch, Event]], poll: float) -> None:
        """Block until a task ends, a message arrives, a deadline passes or ``poll`` seconds went by;
        turn what happened into events (with the dispatch each belongs to)."""
        ray = self._ray
        running = self._running
        refs = list(running)
        if self._take is None:  # the sink was lost: what it would have said is gone with it
            for t in running.values():
                if t.uses_sink:
                    t.uses_sink = False
                    if t.started is None and t.dispatch.timeout is not None:  # count from submission
                        t.started = t.submitted
                        t.deadline = t.submitted + t.dispatch.timeout
        take = self._take  # always watched when there is one: wake() goes through it
        if take is not None:
            refs.append(take)
        deadlines = [t.deadline for t in running.values() if t.deadline is not None]
        timeout = poll if not deadlines else min(poll, max(0.0, min(deadlines) - time.monotonic()))
        if not refs:
            if timeout > 0:
                time.sleep(timeout)
            ready = []
        else:
            ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
            if ready and len(refs) > 1:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        if take is not None and take in ready:
            self._handle_messages(self._take_messages(None), out)
        done = [running.pop(ref) for ref in ready if ref is not take]
        if done:
            for task, outcome in zip(done, self._outcomes(done), strict=True):
                result, sent = outcome
                if task.seen < sent:
                    self._drain(task, sent, out)
                d = task.dispatch
                for seq in sorted(task.early):  # only if a message was lost: yield what did arrive
                    out.append((d, CallProgress(d.call.id, task.early[seq])))
                self._by_token.pop(task.token, None)
                self._governance.give_back(d)
                out.append((d, CallFinished(d.call.id, result)))
        self._expire(out)

    # ----------------------------------------------------------------- messages from running calls

    def _take_messages(self, timeout: float | None) -> list[tuple[Any, ...]]:
        """The messages of the ready (or, with a timeout, soon ready) take; a new take is left pending."""
        ray = self._ray
        try:
            messages = ray.get(self._take, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            return []
        except ray.exceptions.RayError:  # the sink actor died (its node was lost): start another
            ray_connection.drop_sink(self._sink)
            self._sink = self._take = None
            return []
        self._take = self._sink.take.remote(self._id)
        return list(messages)

    def _handle_messages(self, messages: list[tuple[Any, ...]], out: list[tuple[Dispatch, Event]]) -> None:
        now_mono, now_wall = time.monotonic(), time.time()
        for msg in messages:
            task = self._by_token.get(msg[1])
            if task is None:  # a wake-up, or a call that already timed out or was stopped
                continue
            if msg[0] == "p":
                task.seen += 1
                task.early[msg[2]] = msg[3]
                d = task.dispatch
                while task.next_seq in task.early:
                    out.append((d, CallProgress(d.call.id, task.early.pop(task.next_seq))))
                    task.next_seq += 1
            elif msg[0] == "s" and task.started is None:
                # The worker's wall clock says how long ago it started (exact on one machine, NTP-close
                # on a cluster); never earlier than the submission, never later than now.
                lag = min(max(0.0, now_wall - msg[2]), now_mono - task.submitted)
                task.started = now_mono - lag
                task.pid = msg[3]
                if task.dispatch.timeout is not None:
                    task.deadline = task.started + task.dispatch.timeout

    def _drain(self, task: _Running, sent: int, out: list[tuple[Dispatch, Event]]) -> None:
        """A call finished before the host saw all its progress: take messages until it has."""
        end = time.monotonic() + PROGRESS_DRAIN_S
        while task.seen < sent and self._take is not None:
            left = end - time.monotonic()
            if left <= 0:
                return
            self._handle_messages(self._take_messages(left), out)

    # ----------------------------------------------------------------- outcomes

    def _outcomes(self, done: list[_Running]) -> list[tuple[ToolResult, int]]:
        ray = self._ray
        try:  # one round trip for the usual case: every task returned normally
            returned = ray.get([t.ref for t in done])
        except Exception:
            pass
        else:
            for _result, _sent, spans in returned:
                if spans:
                    tracing.export(spans)  # the tool's own spans, under its call's (see ``tracing``)
            return [(r, n) for r, n, _spans in returned]
        outcomes = []
        for t in done:
            try:
                result, sent, spans = ray.get(t.ref)
                if spans:
                    tracing.export(spans)  # the tool's own spans, under its call's (see ``tracing``)
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
        detail = ray_connection.first_line(exc)
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

    def _expire(self, out: list[tuple[Dispatch, Event]]) -> None:
        now = time.monotonic()
        for ref, task in list(self._running.items()):
            if task.deadline is None or now < task.deadline:
                continue
            self._forget(ref)
            call = task.dispatch.call
            grace = f"; its worker is killed if the tool has not stopped {self._kill_grace}s later" \
                if self._kill_grace > 0 else "; its worker was killed"
            out.append((task.dispatch, CallFinished(call.id, timeout_result(
                call.id, call.name, task.dispatch.timeout, f"its Ray task was cancelled{grace}", pid=task.pid,
                duration=now - (task.started if task.started is not None else task.submitted)))))
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
        """Every batch still running gets "cancelled" for what it had pulled; its tasks are interrupted
        (KeyboardInterrupt in the tool), killed if still running after the grace, and waited for; then
        Ray is released. Waits for the driver to end its round (it sees ``_closing``) so that nothing
        is submitted or routed under it."""
        with self._lock:
            if self._closed or self._closing:
                return
            self._closing = True
        self.wake()
        hub = self._hub
        with hub.closing(self._kill_grace + 5.0):
            stops = hub.locked(self._cancel_all)
            with self._lock:
                self._closed = True
                dying = list(self._dying.items())
                self._dying.clear()
            self._shutdown(stops, dying)

    def _shutdown(self, stops: list[Any], dying: list[tuple[Any, threading.Timer]]) -> None:
        ray = self._ray
        for _, timer in dying:
            timer.cancel()
        refs = stops + [ref for ref, _ in dying]
        if refs:
            rest = refs
            if self._kill_grace > 0:
                for ref in stops:
                    try:
                        ray.cancel(ref, force=False)
                    except Exception:
                        pass
                try:
                    _, rest = ray.wait(refs, num_returns=len(refs), timeout=self._kill_grace)
                except Exception:
                    pass
            for ref in rest:
                self._kill(ref)
            if rest:  # a force-cancelled task's result is ready once Ray has killed its worker
                try:
                    ray.wait(rest, num_returns=len(rest), timeout=KILL_WAIT_S)
                except Exception:
                    pass
        if self._sink is not None:
            try:
                self._sink.close.remote(self._id)  # lets the pending take return
            except Exception:
                pass
            self._sink = self._take = None
        if self._actors is not None:  # sessions the executor did not close (it closes its own first)
            self._actors.close()
        self._tool_refs.clear()
        ray_connection.release(ray)


def _readable(fd: int) -> bool:
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):  # closed by its owner: let the owner look
        return True


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
    return _pickle_error(obj) or ray_connection.first_line(exc)


__all__ = ["RayBackend"]
