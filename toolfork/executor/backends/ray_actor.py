"""Ray sessions: a session's state in a Ray actor of its own, its calls as the actor's method calls.

Why an actor: a session's calls must all reach one state, and a Ray task may run on any worker of any
node; an actor is one worker process that Ray keeps for as long as its handle lives, and runs its
method calls one at a time, in order. One actor per session, never shared, so two sessions never
share a process, a module or a state. The rules every session shares (order, admission, counting,
tracing, lost or restored) are ``executor.sessions``'s; this module is the place (``SessionPlace``)
the Ray backend gives them.

    ActorPlace (host)                                     SessionActor (a Ray worker process)
    open:     SessionActor.remote() ── ready() ──────────> subreaper, (pid, node)
              open((factory, args, kwargs), checkpoint) ─> state = factory(...)  [the executor's timeout]
    call:     call(tool, hooks, call item, checkpoint) ──> ray_task.run_call with runtime.state = state
              <── (result, the tool's spans, checkpoint bytes or why not, its children)  [ray.get, the call's timeout]
    fault:    end(): what the actor started, then the actor (ray.kill) ── checkpoint? a new actor, restore(bytes)
    snapshot: snapshot() ──> the state's cloudpickle bytes ──> rebuilt here

Faults, as in a fork session: a tool that raises fails its call only. A call past its timeout is
"timeout": the actor is killed at once (no grace: an actor's running method cannot be interrupted and
then go on), with every process its calls started. An actor that dies under a call (``os._exit``, a
signal, the OOM killer, its node lost) makes the call "crashed". Either way the session is lost, or,
with ``checkpoint=True``, a new actor takes over with the state as it was before the call.

The checkpoint is held by the host, as bytes: after the factory and after each call the actor pickles
its state (cloudpickle) and returns it with the result, so it outlives the actor that made it. The host
never unpickles it; only a new actor does. So with a checkpoint the state must pickle: a state that
cannot is refused when the session opens, naming why; one that stops pickling after a call leaves the
session without a checkpoint from then on (a later fault says so). Resources (sockets, locks, threads,
files) are whatever the state's pickling makes of them, never the live state's own.

Opening a session takes an actor started ahead (``SPARES`` per executor, none of which has held a
state), so it waits for a round trip and the factory, not for a Ray worker process to start.

What an actor's calls start dies with it: the actor is the subreaper of what its tools start (a daemon
that left its process group too) and the leader of its own process group; killing it kills that group
and every descendant first. On this node the host does it; an actor on another node is ended by a
task placed on its node. An actor that crashed can no longer be asked for its descendants: its
process group is killed, and so is each child it named after its last call (its calls return them;
a daemon orphaned below it is its child, as it is their subreaper); a daemon that left the group during
the call that crashed outlives it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolfork.executor import tracing
from toolfork.executor.backends.ray_connection import first_line
from toolfork.executor.invoke import error_info, timeout_result
from toolfork.executor.sessions.place import ProcessGone, SessionSpec
from toolfork.executor.types import ErrorInfo, ToolResult

if TYPE_CHECKING:
    from toolfork.executor.types import ToolCall
    from toolfork.executor.wire.callitem import CallItem, TraceParent
    from toolfork.tools.tool import Tool

READY_TIMEOUT_S = 60.0  # how long an actor may take to start (a cluster may have to start a node for it)
PR_SET_CHILD_SUBREAPER = 36
SPARES = 1  # actors started ahead per executor, once it opened a session


class SessionActor:
    """One session's state and its calls, in a Ray worker process (see the module docstring)."""

    def __init__(self) -> None:
        self._state: Any = None

    def ready(self) -> tuple[int, str]:
        """This process, made the subreaper and group leader of what its calls start; (pid, node id)."""
        import ray

        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except Exception:  # not Linux: what a call started and left is its own
            pass
        if os.getpgid(0) != os.getpid():
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
        return os.getpid(), str(ray.get_runtime_context().get_node_id())

    def open(self, box: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]],
             checkpoint: bool) -> tuple[ErrorInfo | None, bytes | None, str | None, list[Child]]:
        """Build the state: (the factory's error or None, the checkpoint's bytes, why there are none, the
        processes it started)."""
        factory, args, kwargs = box
        try:
            self._state = factory(*args, **kwargs)
        except Exception as exc:
            return error_info(exc, prefix="the session's factory failed"), None, None, children()
        return (None, *self._pickled(), children()) if checkpoint else (None, None, None, children())

    def restore(self, blob: bytes) -> None:
        self._state = pickle.loads(blob)

    def call(self, executor_id: str, tool_box: tuple[str, Any], hooks_box: tuple[Any] | None, item: CallItem,
             checkpoint: bool) -> tuple[ToolResult, list[Any], bytes | None, str | None, list[Child]]:
        """One call on the state, by the Ray task's own body: (result, the tool's spans, the checkpoint's
        bytes of the state after it, why there are none, the processes this actor's calls started)."""
        from toolfork.executor.backends.ray_task import run_call
        from toolfork.tools.runtime import SESSION_STATE

        token = SESSION_STATE.set(self._state)
        try:
            result, _sent, spans = run_call(executor_id, tool_box, hooks_box, 0, item, None)
        finally:
            SESSION_STATE.reset(token)
        return (result, spans, *self._pickled(), children()) if checkpoint else (result, spans, None, None, children())

    def snapshot(self) -> tuple[bytes | None, str | None]:
        return self._pickled()

    def _pickled(self) -> tuple[bytes | None, str | None]:
        from ray import cloudpickle

        try:
            return cloudpickle.dumps(self._state), None
        except Exception as exc:
            return None, f"the session's state (a {type(self._state).__name__}) cannot be pickled: " \
                         f"{type(exc).__name__}: {exc}"


Child = tuple[int, str]  # a process: its pid and its start time (field 22 of /proc/PID/stat)


def children() -> list[Child]:
    """This process's children (those of every thread): what its calls started, and, as it is their
    subreaper, the orphans below them (a daemon that left its group too)."""
    found = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                pids = f.read().split()
        except OSError:
            continue
        for pid in pids:
            started = _start_time(int(pid))
            if started is not None:
                found.append((int(pid), started))
    return found


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def end_tree(pid: int, known: list[Child]) -> None:
    """Kill ``pid``'s process group and every descendant, then ``pid``, and what it last said were its
    children (``known``: found by their start time, so a reused pid is never taken for one), on its node."""
    import psutil

    for child, started in known:
        if _start_time(child) == started:
            with contextlib.suppress(OSError):  # gone already
                os.kill(child, signal.SIGKILL)

    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    for kill in (lambda: os.kill(pid, signal.SIGKILL), lambda: os.killpg(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass
    for p in descendants:
        try:
            p.kill()  # psutil checks the process is still the one listed (its start time)
        except psutil.Error:
            pass


class ActorHost:
    """What an ``ActorPlace`` needs of its backend: Ray, the actor class, the executor's id, each tool's
    reference, the hooks' box, and actors started ahead (``SPARES``, pristine: none has held a state),
    so that opening a session, or a checkpoint taking over, waits for a round trip, not for a Ray worker
    process to start. Made once per backend, with its first session. Any thread."""

    def __init__(self, ray: Any, executor_id: str, tool_box: Callable[[Tool], tuple[str, Any]],
                 hooks_box: tuple[Any] | None, runtime_env: dict[str, Any] | None = None) -> None:
        self.ray = ray
        self.executor_id = executor_id
        self.tool_box = tool_box
        self.hooks_box = hooks_box
        # num_cpus=0: a session holds no CPU while it waits for its next call (Executor(max_sessions=...)
        # bounds how many are open); Ray never restarts it or retries its calls (a state is not rebuilt
        # behind the session's back, and calls have side effects). Of the tasks' ray_options only the
        # runtime_env applies (what the tools import): their CPUs and resources are per call.
        env = {} if runtime_env is None else {"runtime_env": runtime_env}
        self.actor_class = ray.remote(SessionActor).options(num_cpus=0, max_restarts=0, max_task_retries=0, **env)
        try:  # the driver's node: an actor there is ended from here
            self.node: str | None = str(ray.get_runtime_context().get_node_id())
        except Exception:  # Ray Client: the driver is on no node, every actor is ended on its own
            self.node = None
        self.places: weakref.WeakSet[ActorPlace] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._spares: deque[_Actor] = deque()
        self._closed = False

    def take(self) -> _Actor:
        """A started actor for a session: a spare if one is ready, else a new one (a spare that died
        waiting is replaced by a new one); another spare is started in its place."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this executor is closed")
            actor = self._spares.popleft() if self._spares else _Actor(self)
            while len(self._spares) < SPARES:
                self._spares.append(_Actor(self))
        try:
            actor.start()
        except Exception as exc:
            actor.end()
            actor = _Actor(self)
            try:
                actor.start()
            except Exception:
                actor.end()
                raise RuntimeError(f"the session's Ray actor did not start: {type(exc).__name__}: "
                                   f"{first_line(exc)}") from None
        return actor

    def close(self) -> None:
        """Every session still open ends (the executor closes its sessions first: this is what is left),
        and the spares."""
        with self._lock:
            self._closed = True
            spares = list(self._spares)
            self._spares.clear()
        for place in list(self.places):
            place.close()
        for actor in spares:
            actor.end()


class _Actor:
    """One actor and how to end it (apart from its place, so a dropped place's finalizer can end it)."""

    def __init__(self, host: ActorHost) -> None:
        self._host = host
        self.handle: Any = host.actor_class.remote()
        self._ready = self.handle.ready.remote()  # its process starts meanwhile
        self.pid: int | None = None
        self.node: str | None = None
        self.children: list[Child] = []  # what it said its calls (and factory) started, after the last one
        self.ended = False

    def start(self) -> None:
        """Wait until it is ready (a spare is already); raises if it is not, or (on this node) if its
        process was stopped or has gone since (a spare waits where a tool can reach it)."""
        self.pid, self.node = self._host.ray.get(self._ready, timeout=READY_TIMEOUT_S)
        if self.node == self._host.node:
            import psutil

            try:
                status = psutil.Process(self.pid).status()
            except psutil.Error:
                status = psutil.STATUS_DEAD
            if status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE,
                          psutil.STATUS_DEAD):
                raise RuntimeError(f"its process {self.pid} is {status}")

    def end(self) -> None:
        """What it started, then the actor itself. Safe to call twice, and after Ray shut down."""
        if self.ended:
            return
        self.ended = True
        ray = self._host.ray
        if self.pid is not None:
            try:
                if self.node == self._host.node:
                    end_tree(self.pid, self.children)
                else:  # on its own node, by a task placed there
                    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                    there = NodeAffinitySchedulingStrategy(str(self.node), soft=False)
                    ray.remote(num_cpus=0, max_retries=0)(end_tree).options(scheduling_strategy=there).remote(
                        self.pid, self.children)
            except Exception:  # Ray is gone, and its workers with it
                pass
        try:
            ray.kill(self.handle, no_restart=True)
        except Exception:
            pass


class ActorPlace:
    """A session's state in a Ray actor of its own (see the module docstring); one thread at a time
    (the session's lock), but ``interrupt`` and ``close`` from any."""

    def __init__(self, host: ActorHost, spec: SessionSpec) -> None:
        self._host = host
        self._ray = ray = host.ray
        self.checkpoint = bool(spec.checkpoint)  # (AFTER_RESULT is a fork process's; here as True)
        self._saved: bytes | None = None  # the checkpoint: the state's bytes after the last call
        self._unsaved = ""  # why there is no checkpoint now
        self._interrupted = False
        self._actor = host.take()
        finalizer = weakref.finalize(self, self._actor.end)  # a session dropped unclosed: its actor goes with it
        try:
            ref = self._actor.handle.open.remote((spec.factory, spec.args, spec.kwargs), self.checkpoint)
        except Exception as exc:
            finalizer()
            raise TypeError(f"the session's factory and its arguments cannot be sent to its Ray actor: "
                            f"{type(exc).__name__}: {first_line(exc)}") from None
        try:
            error, self._saved, unsaved, self._actor.children = ray.get(ref, timeout=spec.timeout)
        except ray.exceptions.GetTimeoutError:
            finalizer()
            raise TimeoutError(f"the session's factory did not return within the executor's timeout "
                               f"({spec.timeout:g} s); its Ray actor was killed") from None
        except ray.exceptions.RayError as exc:
            finalizer()
            raise RuntimeError(f"the session's Ray actor died while it was built: {first_line(exc)}") from None
        except BaseException:
            finalizer()
            raise
        if error is not None:
            finalizer()
            raise RuntimeError(f"{error.message}\n{error.traceback}".rstrip())
        if unsaved is not None:
            finalizer()
            raise TypeError(f"checkpoint=True in Ray mode keeps the state as its pickled bytes (cloudpickle) after "
                            f"each call, so that a new actor can take over: {unsaved} (fork mode copies it by "
                            f"forking; or open the session without a checkpoint)")
        self._finalizer = finalizer
        host.places.add(self)

    @property
    def pid(self) -> int | None:
        return self._actor.pid

    def call(self, call: ToolCall, tool: Tool, timeout: float | None, context: dict[str, Any],
             trace: TraceParent | None) -> tuple[ToolResult, str | None]:
        ray, actor = self._ray, self._actor
        item: CallItem = (call.id, call.name, call.arguments, timeout, context or None, call.meta, trace)
        start = time.monotonic()
        try:
            ref = actor.handle.call.remote(self._host.executor_id, self._host.tool_box(tool), self._host.hooks_box,
                                           item, self.checkpoint)
        except Exception as exc:  # the arguments could not be sent: only this call fails
            return ToolResult(call.id, call.name, "error", error=ErrorInfo(
                type(exc).__name__, f"the arguments of call {call.id!r} could not be sent to the session's "
                                    f"Ray actor: {first_line(exc)}")), None
        try:
            result, spans, saved, unsaved, actor.children = ray.get(ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            actor.end()
            result = timeout_result(call.id, call.name, timeout, "its Ray actor was killed, with what its calls "
                                    "started", pid=actor.pid, duration=time.monotonic() - start)
            return result, _lost(result)
        except ray.exceptions.RayTaskError as exc:  # the result could not come back: only this call fails
            if self.checkpoint:  # nor did the state's bytes: the checkpoint from before this call is stale
                self._saved = None
                self._unsaved = f"the state after call {call.id!r} could not be sent back with its result"
            return ToolResult(call.id, call.name, "error", duration_s=time.monotonic() - start, worker_pid=actor.pid,
                              error=ErrorInfo(type(exc).__name__, f"the result of tool '{call.name}' could not be "
                                              f"sent back from the session's Ray actor: {first_line(exc)}")), None
        except ray.exceptions.RayError as exc:  # the actor died (or Ray cannot say what became of the call)
            actor.end()
            result = ToolResult(call.id, call.name, "crashed", duration_s=time.monotonic() - start,
                                worker_pid=actor.pid, error=ErrorInfo("WorkerCrashed", (
                                    f"tool '{call.name}' crashed: the session's Ray actor died while running it "
                                    "(os._exit, a signal such as SIGSEGV or SIGKILL, the OOM killer, or its node "
                                    f"lost; Ray does not pass on the exit code or signal): {first_line(exc)}")))
            return result, _lost(result)
        if (result.call_id, result.name, result.worker_pid) != (call.id, call.name, actor.pid):
            # the host's call, as the host knows it, whatever came back (one rule with a fork session's)
            result = dataclasses.replace(result, call_id=call.id, name=call.name, worker_pid=actor.pid)
        if spans:
            tracing.export(spans)  # the tool's own spans, under its call's
        if self.checkpoint:
            self._saved = saved
            self._unsaved = "" if unsaved is None else f"{unsaved} after call {call.id!r}, so it has no checkpoint"
        return result, None

    def restore(self) -> str | None:
        if not self.checkpoint or self._interrupted:
            return ""
        if self._saved is None:
            return self._unsaved
        try:
            actor = self._host.take()
        except RuntimeError as exc:
            return f"its checkpoint could not take over: {exc}"
        try:
            self._ray.get(actor.handle.restore.remote(self._saved), timeout=READY_TIMEOUT_S)
        except Exception as exc:
            actor.end()
            return f"its checkpoint could not take over: {type(exc).__name__}: {first_line(exc)}"
        self._finalizer.detach()
        self._actor = actor
        self._finalizer = weakref.finalize(self, actor.end)
        return None

    def interrupt(self) -> None:
        """From another thread, while a call runs: the actor is killed (the call fails, the session is
        closing or lost)."""
        self._interrupted = True
        self._actor.end()

    def snapshot(self) -> Any:
        ray = self._ray
        try:
            blob, why = ray.get(self._actor.handle.snapshot.remote())
        except ray.exceptions.RayTaskError as exc:
            raise RuntimeError(f"the session's state could not be sent back from its Ray actor: "
                               f"{first_line(exc)}") from None
        except ray.exceptions.RayError as exc:
            self._actor.end()
            raise ProcessGone(f"the session's Ray actor died while sending its state: {first_line(exc)}") from None
        if why is not None:
            raise RuntimeError(f"{why}: it could not be sent to the host")
        return pickle.loads(blob)

    def close(self) -> None:
        self._actor.end()
        self._finalizer.detach()
        self._host.places.discard(self)


def _lost(result: ToolResult) -> str:
    """Why a fault lost the session, in the words of a fork session's."""
    return f"it {result.status}: {result.error.message if result.error else result.status}"


__all__ = ["ActorHost", "ActorPlace", "SessionActor", "end_tree"]
