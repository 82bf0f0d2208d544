"""The fork pool, host side: hands the calls of every batch to the warm workers of a ``WorkerCore``
and turns their frames into events. It is one of the core's two clients (the line lane is the other):
what happens to a worker (timeouts, crashes, requeues) is the core's rule, what a call's events are and
which batch gets them is the Hub's; this module decides which calls go to which worker, and when.

Data flow (``ForkBackend.execute`` joins the ``Hub``; whichever batch owner needs progress runs
``hub_round`` for all of them)::

    batch A ready ─┐ round-robin,                            [worker: before_child, tool, after_child]
    batch B ready ─┼─(one call or chunk)─> worker.call_fd ──>          │ one frame per result / progress
    batch C ready ─┘                                                    │
    A/B/C events <── routed by Dispatch.batch <── FrameReader <── worker.result_fd
                      ▲                                 deadlines, EOF or reported death (crash)
                      └── template control socket: ("spawned", wid, pid), ("exited", pid, status)

* Chunking: a call to a tool whose observed duration is tiny is sent together with the next tiny calls
  of its batch (one write, one wake-up of the worker for many calls); a call to a slow or unknown tool
  goes alone, so quick calls never queue behind it while another worker is idle. A worker only ever
  holds calls of one batch, so stopping a worker touches no other batch.
* Timeouts: the host knows when each worker's current call began (its previous result arrived, or it
  was sent); at the deadline it reports "timeout" at once and asks the template to SIGTERM the
  worker's process group and SIGKILL it after ``kill_grace`` (what the call started dies with the
  worker: see ``fork.template``). The calls queued behind it in its chunk never started: they go back
  to the front of their batch. A fresh worker takes the slot.
* Crashes: EOF on a result pipe, or the template's report of the worker's death (a process the tool
  started may hold a copy of the pipe), means the worker died; its wait status names the signal or exit
  code in the "crashed" result. No retry: tools have side effects.
* Large frames (results and arguments of ``oob.LARGE_FRAME`` bytes and more) do not go through the pipes:
  they cross in a memory file handed over on the worker's side socket (``worker.side``), and the pipe
  carries a header of length 0 in their place (see ``toolfork.executor.wire.oob``). The reader takes the file
  where the header is, so order and the rest of this flow are unchanged.
* ``fresh_process`` tools: the call goes to a one-shot worker forked for it, in an idle worker's slot,
  which gets the slot back when the one-shot is gone. So does a sandboxed call (``Limits.sandboxed``:
  ``network=False``, ``read_paths``, ``write_paths``, ``sandbox=True``): its one-shot enters the
  sandbox before any tool or hook code and is gone after the call, so no warm worker is ever restricted.
* Caps and rate limits (``Governance``): with a gated tool on the Executor, calls are taken by
  ``Hub.take_next``: a call refused a slot or a token waits in its batch's ``capped`` queue, holding
  no worker, and the calls behind it go first; its slot is handed back when it leaves its worker
  (result, failure, cancel, or sent back unstarted). The driver's wait ends when the next token of a
  waiting call is due.
"""

from __future__ import annotations

import errno
import resource
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolfork.executor.backends.base import HubBackend, WorkerSetup
from toolfork.executor.backends.capabilities import Capabilities
from toolfork.executor.backends.dispatch import Dispatch
from toolfork.executor.backends.fork.core import WorkerCore
from toolfork.executor.backends.fork.group_verdict import overruled
from toolfork.executor.backends.fork.limits import descriptors_exhausted, no_room_for_sessions
from toolfork.executor.backends.fork.session_link import SPARES, ProcessPlace, SessionSpares
from toolfork.executor.backends.fork.template_link import TemplateGone
from toolfork.executor.backends.fork.workers import Worker
from toolfork.executor.backends.hub import POLL_INTERVAL, BatchState, Hub
from toolfork.executor.stats import Load
from toolfork.executor.types import CallFinished, CallProgress, CallStarted, ToolResult
from toolfork.executor.wire import frames, framing
from toolfork.executor.wire.frames import Progress, ResultMessage

if TYPE_CHECKING:
    from toolfork.executor.backends.fork.lane import LineLane
    from toolfork.executor.sessions.place import SessionSpec
    from toolfork.governance.policy import Governance
    from toolfork.tools.tool import Tool


class ForkBackend(HubBackend):
    """The pool: batches in, events out, on the workers of its ``core`` (which the line lane borrows)."""

    capabilities = Capabilities(
        "fork", in_host=False, kills_at_deadline=True, limits=True, sandbox=True, has_workers=True,
        recycles=True, sessions=True, host_calls=True, lines=True)

    def __init__(self, tools: dict[str, Tool], workers: int, hooks: WorkerSetup, kill_grace: float = 1.0,
                 governance: Governance | None = None) -> None:
        from toolfork.governance.policy import Governance

        self._kill_grace = kill_grace
        self._closed = False
        self._governance = governance if governance is not None else Governance(self.capabilities)
        self.core = WorkerCore(tools, workers, hooks, kill_grace, self._governance)
        self._hub = Hub(self)
        self._tool_frames: list[bytes] = []  # tools added later, for the workers (sent by the driver)
        self._hub.watch()  # deadlines and cancels are kept while no batch owner drives
        self._spares: SessionSpares | None = None  # session processes forked ahead (made with the first session)
        self._spares_lock = threading.Lock()

    def open_session(self, spec: SessionSpec) -> ProcessPlace:
        """A session's state in a process of its own, forked by the template's sessions' supervisor (see
        ``fork.session_worker``)."""
        spares = self._session_spares()
        why = no_room_for_sessions(1 + SPARES)  # this one, and the spares forked ahead as it is taken
        try:
            if why is None:
                return ProcessPlace(spares, spec, self._governance)
        except OSError as exc:
            if exc.errno != errno.EMFILE:
                raise
            why = descriptors_exhausted(*resource.getrlimit(resource.RLIMIT_NOFILE))
        from toolfork.executor.sessions.session import TooManySessions

        raise TooManySessions(why)

    def prepare_session(self, spec: SessionSpec, on_discard: Callable[[], None] | None = None) -> bool:
        """Open a session of ``spec`` ahead, for the next ``open_session`` of an equal spec (see
        ``ProcessPlace.prepare``); False when it will not be."""
        if no_room_for_sessions(2 + SPARES) is not None:  # no descriptors to spare for one ahead
            return False
        return ProcessPlace.prepare(self._session_spares(), spec, self._governance, on_discard)

    def _session_spares(self) -> SessionSpares:
        with self._spares_lock:
            if self._closed:
                raise RuntimeError("this executor is closed")
            if self._spares is None:
                self._spares = SessionSpares(self.core, self._governance, self._kill_grace)
            return self._spares

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the current workers (waiting for the template to report any being forked)."""
        return [] if self._closed else self.core.worker_pids

    @property
    def template_pid(self) -> int | None:
        return self.core.template_pid

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def drive(self) -> threading.Lock:
        """The Hub's driver lock: whoever holds it runs the workers (the line lane takes it for a job)."""
        return self._hub.drive

    def add_tools(self, tools: list[Tool]) -> None:
        """The template learns the tools at once (workers it forks from now on have them); live workers
        get them from the driver before it starts another call, so no frame interleaves with a call's."""
        import dill

        named = {t.name: t for t in tools}
        blob = dill.dumps(named)
        self.core.teach_template(blob, named)
        frame = framing.encode(frames.tools_frame(blob))
        self._hub.locked(lambda: self._tool_frames.append(frame), wake=False)
        if self._hub.drive.acquire(blocking=False):
            try:
                self._hub.locked(self._ship_tools, wake=False)
            finally:
                self._hub.drive.release()
        else:
            self.wake()

    def _ship_tools(self) -> None:
        shipped, self._tool_frames = self._tool_frames, []
        self.core.ship_tools(shipped)

    # ----------------------------------------------------------------- batches

    def open_lane(self, parse: Callable[[bytes, int], Any], context: dict[str, Any] | None) -> LineLane:
        """The line lane on this pool's workers (``fork.lane``): it borrows them and the driver lock."""
        from toolfork.executor.backends.fork.lane import LineLane

        return LineLane(self, parse, context)

    def hub_round(self) -> None:
        """One turn of the driver (``Hub.drive`` held): start calls, wait, route what happened."""
        if self._closed:
            raise RuntimeError("this executor is closed")
        core = self.core
        live = self._hub.locked(self._begin_round, wake=False)
        if live is None:
            return
        # The wait ends at the next deadline, and when the template is to be looked at (check_template).
        timeout = max(0.0, core.next_wake() - time.monotonic())
        if self._governance.any_gated:  # a call waiting for a token: look again when it is due
            due = self._hub.locked(lambda: self._governance.wake_at(self._hub.capped_tools()), wake=False)
            if due is not None:
                timeout = min(timeout, max(0.0, due - time.monotonic()))
        watched = []
        for b in live:  # a live source with more to give wakes the driver too
            if b.feed.wakeup_fd is None:
                timeout = min(timeout, POLL_INTERVAL)
                b.poked = True  # its owner asks the source again after this wait
            else:
                watched.append((b.feed.wakeup_fd, b))
        self._after_wait(core.select(timeout, watched))

    def _begin_round(self) -> list[BatchState] | None:
        """Settle, ship tools, start calls (inside ``Hub.locked``). None if calls started and some owner
        has their CallStarted events (news: delivered now, the wait is next round), else the live
        batches (a batch whose feed leaves out starts waits for its results in this round)."""
        hub = self._hub
        self.core.check_template(self)
        if hub.pending:
            self._settle()
        if self._tool_frames:
            self._ship_tools()
        if self._start() and any(b.events for b in hub.batches):
            hub.wake_owners()
            return None
        return hub.to_watch()

    def hub_tend(self) -> None:
        """The watcher's turn (``Hub.drive`` held, nobody else driving): what came, without waiting."""
        if self._closed:
            return
        self._after_wait(self.core.select(0))

    def _after_wait(self, ready: list[Any]) -> None:
        """Route what happened: frames, deaths; then expire and settle (inside ``Hub.locked``)."""
        self._hub.locked(lambda: self._route_ready(ready))

    def _route_ready(self, ready: list[Any]) -> None:
        self.core.take(ready, self, _poke)
        if self._hub.pending:
            self._settle()

    def hub_settle(self) -> None:
        self._hub.locked(self._settle)

    def _start(self) -> int:
        """Idle workers take calls from the batches in turn: one call, or one chunk of quick calls.
        Returns how many workers were given calls."""
        idle = self.core.idle
        take = self._hub.take_next
        admit = self._governance.admits if self._governance.any_gated else None
        sent = 0
        while idle:
            taken = take(admit)
            if taken is None:
                break
            self._send(taken[0], taken[1], idle.popleft())
            sent += 1
        return sent

    def _joins_chunk(self, d: Dispatch) -> bool:
        """Whether ``d`` may ride in a chunk of quick calls: quick, and neither a process of its own
        (``fresh_process``, a restriction) nor a slot of its own to hold (a cap, a rate limit)."""
        name = d.call.name
        return self.core.is_quick(name) and not d.tool.fresh_process and name not in self._governance.alone

    def _send(self, b: BatchState, first: Dispatch, w: Worker) -> None:
        core = self.core
        ready = b.ready
        chunk = [first]
        governance = self._governance
        name = first.call.name
        if first.tool.fresh_process or (name in governance.alone and governance.restricted(name)):
            # a process of its own, forked from the pristine template, in w's slot; a sandboxed call
            # enters its sandbox before anything else, and its frames cross as data only
            limits = governance.limits_for(name)
            w = core.one_shot(w, limits if limits is not None and limits.sandboxed else None)
        elif self._joins_chunk(first):
            limit = core.chunk_limit(len(ready) + 1, len(core.idle) + 1, w)
            joins = self._joins_chunk
            tool = first.tool  # a call of the same tool joins as ``first`` did, without asking again
            while len(chunk) < limit and ready:
                d = ready[0]
                if d.tool is not tool and not joins(d):
                    break
                chunk.append(ready.popleft())
        frame = frames.calls_frame(Dispatch.items(chunk))
        if core.send(w, chunk, frame, self) and not b.abandoned and b.feed.starts:
            b.events.extend([CallStarted(d.call.id, d.call.name) for d in chunk])

    # ----------------------------------------------------------------- the core's client

    def progress(self, d: Dispatch, msg: Progress) -> None:
        Hub.route(d, CallProgress(d.call.id, msg.value))

    def finished(self, w: Worker, d: Dispatch, msg: ResultMessage) -> float | None:
        if d.slot is not None:  # the hot path: most calls hold none
            self._governance.give_back(d)
        call_id = d.call.id
        result = msg.rebuilt(call_id, d.call.name, w.pid)
        if w.sandboxed:  # its cgroup's word, read outside the sandbox, overrules what the call said
            core = self.core
            result = overruled(result, self._governance.limits_for(d.call.name), core.template_pid, core.pid_of(w),
                               core.exit_status)
        Hub.route(d, CallFinished(call_id, result))
        return result.duration_s

    def fail(self, d: Dispatch, result: ToolResult) -> None:
        self._governance.give_back(d)
        Hub.finish(d, result)

    def wanted(self, d: Dispatch) -> bool:
        """Whether a call that never started should still run; one that should not gives up its slot."""
        b = d.batch
        if not d.stopped and b is not None and not b.abandoned:
            return True
        self._governance.give_back(d)
        return False

    def put_back(self, items: list[Dispatch]) -> None:
        """Calls that never started go back to the front of their batch, in order (the core puts back
        what one worker was sent, and a worker only ever holds calls of one batch); they give up their
        slots and are admitted again when their turn comes."""
        for d in items:
            self._governance.give_back(d)
        items[0].batch.ready.extendleft(reversed(items))  # type: ignore[union-attr]

    def load(self) -> Load:
        """Busy and idle workers, calls not yet sent, restarts (any thread: copies, taken in one step each)."""
        core = self.core
        busy = sum(1 for w in list(core.workers.values()) if w.inflight)
        return Load(core.size, busy, len(core.idle), self._hub.queued(), dict(core.restarts), core.template_restarts)

    def next_deadline(self) -> float:
        """The earliest deadline of a running call, or the next look at the template (always one: the
        template is looked at even while no batch runs, by the Hub's watcher)."""
        return self.core.next_wake()

    def wake(self) -> None:
        self.core.wake()

    def _settle(self) -> None:
        """Act on cancelled, stopped and abandoned batches (inside ``Hub.locked``) by the Hub's rule: a worker
        running one of their calls is killed and replaced; calls not started are dropped."""
        self._hub.settle(self._placed, self._kill_running)

    def _placed(self, b: BatchState) -> list[tuple[Dispatch, bool]]:
        """``b``'s calls on workers: each worker's first is running, the rest of its chunk waits."""
        placed: list[tuple[Dispatch, bool]] = []
        for w in self.core.workers.values():
            if w.inflight and w.inflight[0].batch is b:  # a worker's calls all come from one batch
                placed.extend((d, i == 0) for i, d in enumerate(w.inflight))
        return placed

    def _kill_running(self, stopped: list[Dispatch]) -> None:
        """Their results went already: kill their workers; what waited behind them (and was not
        stopped) goes back to its batch."""
        ids = {id(d) for d in stopped}
        core = self.core
        for w in [w for w in core.workers.values() if w.inflight and id(w.inflight[0]) in ids]:
            self._governance.give_back(w.inflight.popleft())
            core.stop(w, self)

    # ----------------------------------------------------------------- shutdown

    def close(self) -> None:
        """Every batch still running gets "cancelled" for what it had pulled; then every process goes.
        Waits for the driver to finish its round (it is woken) so no pipe is closed under it."""
        if self._closed:
            return
        with self._spares_lock:
            if self._spares is not None:
                self._spares.close()
        self.wake()
        hub = self._hub
        hub.unwatch()
        with hub.closing(self._kill_grace + 5.0) as driving:
            if not hub.locked(self._cancel_everything):
                return
            if driving:
                self.core.shutdown()
            else:  # the driver never let go (a hook that calls close() from inside a wait): kill, close nothing
                self.core.kill_everything()

    def _cancel_everything(self) -> bool:
        """Closing (inside ``Hub.locked``): every call sent or ready is reported "cancelled". False if
        another thread closed the pool first."""
        if self._closed:
            return False
        self._closed = True
        placed = [(d, i == 0) for w in self.core.workers.values() for i, d in enumerate(w.inflight)
                  if type(d) is Dispatch]  # else a line of a lane cut short: nobody waits
        for d, _ in placed:
            self._governance.give_back(d)
        self._hub.cancel_everything(placed)
        return True



def _poke(batch: BatchState) -> None:
    """A batch whose live source has more: its owner empties the wake-up fd as it pulls (``Hub.execute``)."""
    batch.poked = True


__all__ = ["ForkBackend", "TemplateGone"]
