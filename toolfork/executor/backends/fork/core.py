"""The worker core: the fork pool's workers and the rules for what can happen to them, once.

Two clients run work on the same warm workers: the pool (``fork.pool.ForkBackend``, calls of any number
of batches, through the ``Hub``) and the line lane (``fork.lane.LineLane``, the raw lines of one
``toolfork run`` job). What a worker is sent differs (a Dispatch, or a Line); what can happen to a
worker does not, and is decided here, for both:

    client: which items, to which idle worker ──> WorkerCore.send(w, items, frame)
                                                    │ call pipe (tools added meanwhile go first)
    worker: one frame per result / progress  ──> WorkerCore.read(w, client)
                                                    │ client.progress / client.finished / client.fail
    the template: a worker's death          ──> WorkerCore.bury(client) -> crashed(w, client)
    the clock: a running item's deadline    ──> WorkerCore.expire(client) -> time_out(w, now, client)

The fault rules (written in ``fork.faults`` and ``fork.template_care``, below; the results the host
makes itself are in ``fork.outcomes``; the ones a frame stands for in ``wire.frames``):

* timeout: the running item fails "timeout" at its deadline, the worker's process group is stopped by
  the template (SIGTERM, then SIGKILL after the grace), and a fresh worker takes the slot;
* crash: EOF on the result pipe, or the template's report of the worker's death, fails the running item
  "crashed" with the wait status; bytes that are not a frame fail it as damaged, and so does a frame
  that is not the running item's (a wrong shape, another call's ``seq``: see ``read``);
* the template died or was stopped (a tool can signal its worker's parent): noticed at once on its
  control socket, else by ``check_template`` within ``TEMPLATE_CHECK_S``; every worker is ended with it, their
  running items fail "crashed" naming the template, the rest go back, and a new template is forked from
  the host (``_replace_template``);
* a worker that says it leaves (its tool damaged its channels) is replaced after that result;
* requeue: items queued behind a stopped worker's running one never started and go back to the client
  (``client.put_back``); a worker that *died* counts against them, and one that has killed
  ``MAX_REQUEUES`` workers before starting fails instead;
* an idle worker found dead when sent work: the work goes back, the slot gets a fresh worker;
* a limit (``Governance.limits_for``) a worker died of (SIGXCPU, SIGXFSZ) fails its item "error" with
  ``LimitExceeded`` naming the limit, not "crashed";
* recycling (``Executor(max_calls_per_worker=, max_worker_memory_mb=)``): a worker that has run its
  number of items, or whose own memory (its resident set beyond the template's: not the pages it shares
  with the host) is above the cap once its items are done, leaves between items (its
  call pipe closed, so it ends by itself) and a fresh worker takes the slot; nothing fails.

Where the cut is. What shares one invariant, that one thread at a time changes the workers, is one
object, ``WorkerCore``; its code is in three rooms by job, so a reader of one call's path reads one:

    fork.workers        Worker, WorkerState, rss_mb, Client: the table's values (no rules)
    fork.faults         FaultRules: what happens to a worker that must go (bury, crashed, time_out,
                        stop, replace, drop, requeue, _retire, _refill, the restart counts)
    fork.template_care  TemplateCare(FaultRules): replacing a dead template, teaching it tools, the
                        template link's facts the clients read
    fork.core           WorkerCore(TemplateCare): the table, idle set and selector (the template's
                        control socket and the wake-up pipe on it), the hot path (send, select, take,
                        read), the clock (expire), the look at the template (check_template), recycling
                        and the quick/slow estimate (a moving mean of each tool's durations, learnt as
                        results are read, which both clients and the selector's spin read)

The cut is where one trivial call's path does not cross it: a round reads the template's clock, the
workers' frames and the deadlines here, and enters ``fork.faults`` or ``fork.template_care`` only when
something went wrong (``bench/call_path.py`` counts the same changes of file as before the cut). The
parts are bases of one class, not objects of their own: they act on the one table, which
``WorkerCore.__init__`` sets and their class bodies declare. What needs none of that is elsewhere: the
results the host makes itself (``fork.outcomes``), the template's end of the conversation
(``fork.template_link``), and which item goes to which worker (the clients: ``fork.pool``, ``fork.lane``).

While a worker's items are due within ``SPIN_S``, the selector is polled that long (yielding the CPU
between looks) before the driver sleeps in it. It takes no lock: its client calls it from the thread
that holds the Hub's driver lock (the pool inside ``Hub.locked`` steps, the lane while it holds the
driver lock for its job), so one thread at a time changes the workers.
"""

from __future__ import annotations

import math
import selectors
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolfork.executor import tracing
from toolfork.executor.backends.base import WorkerSetup
from toolfork.executor.backends.fork.template_care import TEMPLATE_KEY, TemplateCare, own_ceilings
from toolfork.executor.backends.fork.template_link import (
    HOST_FDS,
    TEMPLATE_CHECK_S,
    TemplateGone,
    TemplateLink,
    signal_groups,
)
from toolfork.executor.backends.fork.workers import Client, Worker, WorkerState, rss_mb
from toolfork.executor.wire import WakePipe, ceiling, frames, framing, oob
from toolfork.executor.wire.frames import WORKER_GOES, Progress, Spans, unreadable_result
from toolfork.executor.wire.pipes import SPIN_S, look_briefly  # the driver's look for a quick call's result

if TYPE_CHECKING:
    from toolfork.governance.limits import Limits
    from toolfork.governance.policy import Governance
    from toolfork.tools.tool import Tool

QUICK_CALL_S = 0.0005  # tools whose recent calls took less than this are sent in chunks
MAX_CHUNK = 64
F_GETPIPE_SZ = 1032

_WAKE = object()  # selector key data of the wake-up pipe (the template's control socket's: TEMPLATE_KEY)


def _out_of_place(seq: int, expected: int, inflight: int) -> str:
    """What was wrong with a well-formed frame that is not the running item's (see ``WorkerCore.read``)."""
    if not inflight:
        return f"a frame for call #{seq} of this worker while it had no call to run"
    if seq < expected:
        return f"a second result for call #{seq} of this worker (call #{expected} was running)"
    return f"a frame for call #{seq} of this worker while call #{expected} was running"


class WorkerCore(TemplateCare):
    """A pool's workers: started warm from the template, kept at ``size``, replaced by the fault rules
    (see the module docstring). One thread at a time calls it (the one holding the driver lock)."""

    def __init__(self, tools: dict[str, Tool], size: int, hooks: WorkerSetup, kill_grace: float,
                 governance: Governance) -> None:
        if size < 1:
            raise ValueError(f"workers must be at least 1, got {size}")
        self.size = size
        self.governance = governance  # the limits a worker died of, and when to recycle one
        self._workers: dict[int, Worker] = {}
        # What a replacement template is forked with: every tool the pool has (added ones included).
        self._tools, self._hooks, self._kill_grace = dict(tools), hooks, kill_grace
        self._ceilings = own_ceilings(self._tools)  # the tools that set max_result_mb (most set none)
        self._link = TemplateLink(tools, hooks, kill_grace, self._workers)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._link.ctrl, selectors.EVENT_READ, TEMPLATE_KEY)
        self._wake = WakePipe()  # a cancel or close from another thread interrupts the wait
        HOST_FDS.add(self._sel.fileno())  # the host's own: no template forked later holds its epoll
        self._sel.register(self._wake.fd, selectors.EVENT_READ, _WAKE)
        self._next_wid = 0
        self._ewma: dict[str, float] = {}
        self._owed_tools: dict[int, list[bytes]] = {}  # worker id -> tool frames it gets before its next work
        # Workers ended early, by cause, and templates replaced (Executor.stats(); read from any thread).
        self.restarts: dict[str, int] = {}
        self.template_restarts = 0
        for _ in range(size):
            self._spawn()
        for w in list(self._workers.values()):
            self._link.wait_pid(w)
        if self._link.broken is not None:
            cause = self._link.broken
            self.shutdown()
            raise TemplateGone(cause)
        self.idle: deque[Worker] = deque(self._workers.values())

    # ------------------------------------------------------------------ what clients read

    @property
    def workers(self) -> Mapping[int, Worker]:
        """Worker id -> live worker (the core's own table: read it, never change it)."""
        return self._workers

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the current workers (waiting for the template to report any being forked)."""
        return [pid for w in list(self._workers.values()) if (pid := self._link.wait_pid(w)) is not None]

    def pid_of(self, w: Worker) -> int | None:
        """``w``'s pid (waiting for the template to report it forked, if it has not yet)."""
        return self._link.wait_pid(w)

    def state_of(self, w: Worker) -> WorkerState:
        """``w``'s state, with whether a one-shot holds its slot (see ``WorkerState``)."""
        return w.state(any(o.lender is w for o in tuple(self._workers.values())))

    def is_quick(self, name: str) -> bool:
        mean = self._ewma.get(name)
        return mean is not None and mean < QUICK_CALL_S

    def learn(self, name: str, duration: float) -> None:
        prev = self._ewma.get(name)
        self._ewma[name] = duration if prev is None else 0.8 * prev + 0.2 * duration

    def next_deadline(self) -> float | None:
        """The earliest deadline of a running item, or None. Any thread: the Hub's watcher asks while
        the driver may change the workers (a snapshot of them, taken in one step)."""
        deadlines = [w.deadline for w in tuple(self._workers.values()) if w.deadline is not None]
        return min(deadlines) if deadlines else None

    def starting(self) -> bool:
        """Whether work waits on a worker the template has not reported forked (look at it soon)."""
        return any(w.pid is None and w.inflight for w in self._workers.values())

    def next_wake(self) -> float:
        """When a driver's wait must end (``time.monotonic``): the earliest deadline of a running item or
        the next look at the template, whichever comes first (always one). Any thread, as ``next_deadline``."""
        wake = self._link.checked_at + TEMPLATE_CHECK_S
        for w in tuple(self._workers.values()):
            deadline = w.deadline
            if deadline is not None and deadline < wake:
                wake = deadline
        return wake

    def check_template(self, client: Client) -> bool:
        """Look at the template (at most every ``TEMPLATE_CHECK_S``; its death is also seen at once on
        its control socket): one that died or was stopped is replaced (see ``_replace_template``).
        Returns whether it was."""
        link = self._link
        if link.broken is None:
            if time.monotonic() < link.checked_at + TEMPLATE_CHECK_S:  # not due (most rounds): nothing to read
                return False
            link.check()
            if link.broken is None:
                return False
        self._replace_template(client)
        return True

    @staticmethod
    def pipe_room(w: Worker) -> int:
        """Bytes of a frame that may wait in ``w``'s call pipe while it runs what it has: half the
        pipe's capacity (a pipe can be as small as one page when the user has many)."""
        if w.room is None:
            try:
                import fcntl

                w.room = fcntl.fcntl(w.call_fd, F_GETPIPE_SZ) // 2
            except (ImportError, OSError):
                w.room = 0
        return w.room

    def chunk_limit(self, waiting: int, share: int, w: Worker) -> int:
        """How many quick items worker ``w`` takes at once, counting the one it starts with: guided
        self-scheduling, never more than its ``share`` of the ``waiting`` items (shared with the workers
        still idle), so an item slower than its tool's history suggests holds up at most that share;
        and never past the items it has left before it is recycled (at least the one). With a memory cap
        on workers, one item: the cap is looked at between items, which a chunk would skip."""
        governance = self.governance
        if governance.max_worker_memory_mb is not None:  # looked at between calls: one call at a time
            return 1
        limit = min(MAX_CHUNK, math.ceil(waiting / share))
        most = governance.max_calls_per_worker
        if most is not None:
            limit = max(1, min(limit, most - w.calls - len(w.inflight)))
        return limit

    # ------------------------------------------------------------------ sending

    def send(self, w: Worker, items: Sequence[Any], frame: Any, client: Client) -> bool:
        """Send ``frame`` (the message of ``items``) to ``w``, tools added meanwhile first. A worker that
        is busy gets it queued behind its items. False if ``w`` was found dead: ``items`` went back to
        the client, and an idle ``w`` left the pool (a busy one is settled by its EOF)."""
        owed = self._owed_tools.pop(w.wid, None)
        try:
            if owed:
                for tools in owed:
                    framing.write_all(w.call_fd, tools)
            framing.send(w.call_fd, frame, w.side)
        except OSError:
            client.put_back(list(items))
            if not w.inflight:
                self._count_death()
                self.drop(w, kill=False)
            return False
        busy = bool(w.inflight)
        if self._ceilings:  # else every frame's ceiling is the default, as the reader starts with
            w.reader.ceiling = self._ceiling(items, w.reader.ceiling if busy else 0)
        w.inflight.extend(items)
        w.chunks.append(len(items))
        if not busy:
            self._start_next(w, time.monotonic())
        return True

    def _ceiling(self, items: Sequence[Any], at_least: int) -> int:
        """Bytes a frame of ``items`` may rebuild into in the host: the largest of their tools' ceilings
        (``wire.ceiling``; one frame may be any of them)."""
        own, default = self._ceilings, ceiling.DEFAULT
        for name in {item.name for item in items}:
            at_least = max(at_least, own.get(name, default))
        return at_least

    def one_shot(self, lender: Worker, sandbox: Limits | None = None) -> Worker:
        """A worker of its own for one item (a ``fresh_process`` tool, or a sandboxed call: then it
        enters the sandbox of ``sandbox`` first, and its frames are never unpickled: ``wire.dataonly``),
        forked from the pristine template into ``lender``'s slot; ``lender`` gets the slot back when the
        one-shot is gone."""
        w = self._spawn(sandbox)
        w.lender = lender
        if sandbox is not None:
            w.reader.use_data_only()
            w.sandboxed = True
        return w

    @staticmethod
    def _window(w: Worker, item: Any) -> tracing.CallWindow:
        """The running ``item``'s span and when it ran as the host saw it (since ``w`` started it, to now)."""
        now = time.time_ns()
        return tracing.CallWindow(getattr(item, "trace", None), now - int((time.monotonic() - w.running_since) * 1e9),
                                  now)

    # ------------------------------------------------------------------ waiting

    def wake(self) -> None:
        """Interrupt the driver's wait (any thread)."""
        self._wake.wake()

    def select(self, timeout: float | None, extras: Iterable[tuple[int, Any]] = ()) -> list[Any]:
        """Wait up to ``timeout`` for the workers and the ``extras`` (fd, data): the template's messages
        and wake-ups are handled here. Returns the workers with something to read (still in the pool)
        and the data of each extra whose fd is ready."""
        sel = self._sel
        watched = []
        for fd, data in extras:
            try:
                sel.register(fd, selectors.EVENT_READ, data)
                watched.append(fd)
            except (KeyError, ValueError):
                pass
        try:
            ready = self._poll_briefly(sel, timeout) if timeout else []
            if not ready:
                ready = sel.select(timeout)
        finally:
            for fd in watched:
                sel.unregister(fd)
        out: list[Any] = []
        workers = self._workers
        for key, _ in ready:
            data = key.data
            if data is TEMPLATE_KEY:
                self._link.handle()
            elif data is _WAKE:
                self._wake.drain()
            elif type(data) is not Worker or data.wid in workers:
                out.append(data)
        return out

    def _poll_briefly(self, sel: selectors.BaseSelector, timeout: float | None) -> list[Any]:
        """What is ready within ``SPIN_S`` (at most ``timeout``), looked at without sleeping, when a
        worker's items are due by then (their tools' mean durations); nothing, at once, otherwise: a
        worker with a long chunk, or a slow call, is slept for."""
        means = self._ewma
        if not any(w.inflight and len(w.inflight) * means.get(w.inflight[0].name, SPIN_S) < SPIN_S
                   for w in self._workers.values()):
            return []
        return look_briefly(sel.select, SPIN_S if timeout is None else min(SPIN_S, timeout))

    # ------------------------------------------------------------------ the hot path (the fault rules: fork.faults)

    @staticmethod
    def _start_next(w: Worker, now: float) -> None:
        """The item at the front of ``w`` starts now: its clock, and its deadline (the clock is the
        core's: ``expire`` reads it; here, not on ``Worker``, so the hot path stays in this module)."""
        w.running_since = now
        timeout = w.inflight[0].timeout if w.inflight else None
        w.deadline = None if timeout is None else now + timeout

    def read(self, w: Worker, client: Client) -> None:
        """The hot path: every frame of every item passes here once. A frame must be the shape of a
        message (``frames.decode``) and name, by its ``seq``, the item running on ``w``: a result
        settles it, progress is routed to it. A progress of an item already settled is dropped (a
        thread of a finished call may still emit). Anything else (a wrong shape, a frame for an item
        not running, a second result for one) is damage to ``w``'s channel: its running item fails
        ``ChannelDamaged`` and ``w`` is replaced; no other worker's items are touched."""
        frames_read = w.reader.read()
        if frames_read:
            if w.pid is None:  # it answered before the template's report of it was read: read it now,
                self._link.wait_pid(w)  # so its results name their worker (and recycling can look at it)
            inflight = w.inflight
            settled = 0
            expected = w.calls  # the seq of the running item: the items this worker settled so far
            decode = frames.decode
            for f in frames_read:
                msg = decode(f)
                if msg is None:
                    if type(f) is tuple and f and f[0] == framing.BAD_FRAME and inflight:
                        # A frame the host could not rebuild (a value whose class cannot be unpickled
                        # here). Progress is checked in the worker, so it was this item's result: fail it only.
                        current = inflight.popleft()
                        settled += 1
                        expected += 1
                        client.fail(current, unreadable_result(current.call_id, current.name, f, w.pid,
                                                               time.monotonic() - w.running_since))
                        if ceiling.is_marker(f):  # past its ceiling (a progress maybe: it may still run)
                            self.stop(w, client, cause="damaged")
                            return
                        continue
                    w.reader.refuse(frames.describe_shape(f))
                    break
                seq = msg.seq
                if seq != expected or not inflight:
                    if seq < expected and type(msg) is Progress:  # a late progress of an item settled here
                        continue
                    w.reader.refuse(_out_of_place(seq, expected, len(inflight)))
                    break
                current = inflight[0]
                if isinstance(msg, (Progress, Spans)):  # one look for the two that do not settle the item
                    if isinstance(msg, Progress):
                        client.progress(current, msg)
                    else:  # a traced call's own spans: to the host's exporters (a sandbox's, bound to its call)
                        tracing.export(msg.spans, self._window(w, current) if w.sandboxed else None)
                    continue
                inflight.popleft()
                settled += 1
                expected += 1
                duration = client.finished(w, current, msg)
                if type(msg) in WORKER_GOES:  # its tool damaged the worker's channels, or asked for a host call
                    w.calls = expected
                    self.count_restart("damaged")
                    self.replace(w, client)
                    return
                if duration is not None:
                    self.learn(current.name, duration)
                if w.lender is not None:
                    break
            if settled:
                self._count_settled(w, settled)
                w.calls += settled
                # A result starts the next item's clock; progress alone must not reset the running one's.
                if inflight:
                    self._start_next(w, time.monotonic())
                else:
                    w.deadline = None
                    if w.reader.damaged is None:
                        if w.lender is None:
                            if self._worn_out(w):
                                self.count_restart("recycle")
                                self.drop(w, kill=False)  # its call pipe closes: it ends by itself
                                return
                            self.idle.append(w)
                        else:  # a one-shot worker is done: it leaves (what it started dies with it)
                            self._retire(w, kill=False)
                            self._refill(w)
                            return
        if w.reader.eof:
            self.crashed(w, client)

    def _worn_out(self, w: Worker) -> bool:
        """Whether an idle worker is to be recycled: it ran its number of items, or its own memory is over
        the cap. Its own memory is what its resident set has beyond the template's: a worker starts
        sharing every page of the template (forked from it), and only what it adds is its own. (Measured:
        the exact count, /proc/PID/smaps_rollup's private pages, walks every mapping: 60 ms between two
        calls with a host of 400 MB, against two reads of /proc/PID/statm here.) The template is read
        only when the worker's own resident set is over the cap."""
        most, cap_mb = self.governance.max_calls_per_worker, self.governance.max_worker_memory_mb
        if most is not None and w.calls >= most:
            return True
        if cap_mb is None:
            return False
        rss = rss_mb(w.pid)
        return rss > cap_mb and rss - rss_mb(self._link.pid) > cap_mb

    @staticmethod
    def _count_settled(w: Worker, settled: int) -> None:
        """Which of the frames sent to ``w`` are done."""
        chunks = w.chunks
        while settled and chunks:
            if chunks[0] > settled:
                chunks[0] -= settled
                return
            settled -= chunks.popleft()

    def take(self, ready: list[Any], client: Client, other: Callable[[Any], None]) -> None:
        """After a wait (``select``), for either client: the template is looked at first (a dead one's
        workers are ended with it before anything is read), every ready worker that is still ours is
        read (a read before it may have replaced it), the workers the template reported dead are
        buried, and the deadlines that passed expire. ``other`` gets each ready extra of ``select``."""
        self.check_template(client)
        workers = self._workers
        for data in ready:
            if type(data) is not Worker:
                other(data)
            elif data.wid in workers:
                self.read(data, client)
        if self._link.deaths:  # looked at here: a round with none does not enter the fault rules
            self.bury(client)
        self.expire(client)

    def expire(self, client: Client) -> None:
        """Running items past their deadline fail "timeout"; their workers are stopped and replaced
        (``time_out``). The clock is looked at here, every round; what a timeout does is a fault rule."""
        now = time.monotonic()
        for w in list(self._workers.values()):
            if w.deadline is None or now < w.deadline:
                continue
            self.time_out(w, now, client)

    # ------------------------------------------------------------------ slots

    def _spawn(self, sandbox: Limits | None = None) -> Worker:
        wid = self._next_wid
        self._next_wid += 1
        call_w, result_r, side = self._link.spawn(wid, sandbox)
        w = Worker(wid, call_w, result_r, oob.SidePort(side))
        self._workers[wid] = w
        self._sel.register(result_r, selectors.EVENT_READ, w)
        return w

    def _unwatch(self, fd: int) -> None:
        """The selector stops watching ``fd`` (one it never watched, or stopped watching, is no error)."""
        try:
            self._sel.unregister(fd)
        except (KeyError, ValueError):
            pass

    # ------------------------------------------------------------------ the end

    def shutdown(self) -> None:
        """Every worker goes (a busy one killed, an idle one on EOF of its call pipe), then the template."""
        link = self._link
        link.check(now=True)  # a stopped template could neither let its workers go nor kill them
        pids = [w.pid for w in self._workers.values() if w.pid is not None]
        if link.gone:
            signal_groups(pids, signal.SIGKILL)
        for w in list(self._workers.values()):
            self._retire(w, kill=bool(w.inflight) and not link.gone)
        self.idle.clear()
        if link.gone:
            link.abandon()
        else:
            link.shutdown(pids)
        HOST_FDS.discard(self._sel.fileno())
        self._wake.close()
        self._sel.close()

    def kill_everything(self) -> None:
        """Kill every process and close nothing (the driver never let go: its fds may be in use)."""
        self._link.kill([w.pid for w in list(self._workers.values()) if w.pid is not None])


__all__ = ["MAX_CHUNK", "QUICK_CALL_S", "WorkerCore"]
