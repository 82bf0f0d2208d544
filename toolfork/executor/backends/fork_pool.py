"""The fork pool, host side: hands calls to warm forked workers and turns their frames into events.

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
  worker: see ``fork_template``). The calls queued behind it in its chunk never started: they go back
  to the front of their batch. A fresh worker takes the slot.
* Crashes: EOF on a result pipe, or the template's report of the worker's death (a process the tool
  started may hold a copy of the pipe), means the worker died; its wait status names the signal or exit
  code in the "crashed" result. No retry: tools have side effects.
* Large frames (results and arguments of ``oob.LARGE_FRAME`` bytes and more) do not go through the pipes:
  they cross in a memory file handed over on the worker's side socket (``worker.side``), and the pipe
  carries a header of length 0 in their place (see ``toolfork.executor.oob``). The reader takes the file
  where the header is, so order and the rest of this flow are unchanged.
* ``fresh_process`` tools: the call goes to a one-shot worker forked for it, in an idle worker's slot,
  which gets the slot back when the one-shot is gone.
"""

from __future__ import annotations

import logging
import math
import os
import selectors
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from toolfork.executor import framing, oob
from toolfork.executor.backends.base import POLL_INTERVAL, Backend, BatchState, Dispatch, Feed, Hooks, Hub, cancelled
from toolfork.executor.backends.fork.template_link import (
    HOST_FDS,
    TEMPLATE_CHECK_S,
    TemplateGone,
    TemplateLink,
)
from toolfork.executor.types import CallFinished, CallProgress, CallStarted, ErrorInfo, Event, ToolResult
from toolfork.executor.wire import WakePipe, frames
from toolfork.executor.wire.frames import LEAVING, PROGRESS, damaged_result, rebuilt_result, unreadable_result

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool

QUICK_CALL_S = 0.0005  # tools whose recent calls took less than this are sent in chunks
MAX_CHUNK = 64
MAX_REQUEUES = 3  # a call whose worker died before starting it this many times fails instead

_WAKE = object()  # selector key data of the wake-up pipe

log = logging.getLogger("toolfork.executor")


class Worker:
    __slots__ = ("call_fd", "deadline", "inflight", "lender", "pid", "reader", "result_fd", "side", "spawned_at",
                 "started_at", "wid")

    def __init__(self, wid: int, call_fd: int, result_fd: int, side: oob.SidePort) -> None:
        self.wid = wid
        # A one-shot worker (a fresh_process call) runs in the slot of this idle worker, which gets the
        # slot back when the one-shot is done.
        self.lender: Worker | None = None
        self.spawned_at = time.monotonic()
        self.pid: int | None = None
        self.call_fd = call_fd
        self.result_fd = result_fd
        self.side = side  # large frames, both ways, by memory file (see toolfork.executor.oob)
        self.reader = framing.FrameReader(result_fd, side)
        # Sent, not finished; [0] is the running call. Dispatch items, or ``fork_lines.Line`` items while
        # the line lane has the worker.
        self.inflight: deque[Any] = deque()
        self.started_at = 0.0
        self.deadline: float | None = None

    def start_next(self, now: float) -> None:
        self.started_at = now
        timeout = self.inflight[0].timeout if self.inflight else None
        self.deadline = None if timeout is None else now + timeout


def describe_exit(status: int | None) -> tuple[str, str]:
    """(error type, message) for a worker's wait status."""
    if status is None:
        return "WorkerCrashed", "the worker process died (exit status unknown)"
    said = frames.exit_description(os.WEXITSTATUS(status)) if os.WIFEXITED(status) else None
    if said is not None:
        return "WorkerCrashed", f"the worker process left: {said}"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = " (the OOM killer sends SIGKILL)" if sig == signal.SIGKILL else ""
        return "WorkerCrashed", f"the worker process was killed by {name}{hint}"
    return "WorkerCrashed", f"the worker process exited with code {os.WEXITSTATUS(status)}"


# The results the host makes itself when a call ends without a result frame; the line lane
# (fork_lines) makes the same ones, with the same words (the ones a frame stands for are in wire.frames).

def timeout_result(call_id: str, name: str, timeout: float | None, pid: int | None, duration: float) -> ToolResult:
    return ToolResult(call_id, name, "timeout", duration_s=duration, worker_pid=pid, error=ErrorInfo(
        "TimeoutError", f"tool '{name}' did not finish within its timeout of {timeout}s; its worker process "
        "was killed"))


def crashed_result(call_id: str, name: str, exit_description: tuple[str, str], pid: int | None,
                   duration: float) -> ToolResult:
    etype, message = exit_description
    return ToolResult(call_id, name, "crashed", duration_s=duration, worker_pid=pid,
                      error=ErrorInfo(etype, f"tool '{name}' crashed: {message}"))


def not_started_result(call_id: str, name: str, requeues: int, pid: int | None) -> ToolResult:
    """A call whose workers kept dying before they could start it (``MAX_REQUEUES``)."""
    return ToolResult(call_id, name, "crashed", worker_pid=pid, error=ErrorInfo(
        "WorkerCrashed", f"tool '{name}' was not run: {requeues - 1} workers died before they could start it"))


class ForkBackend(Backend):
    mode = "fork"

    def __init__(self, tools: dict[str, Tool], workers: int, hooks: Hooks, kill_grace: float = 1.0) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self._size = workers
        self._kill_grace = kill_grace
        self._closed = False
        self._workers: dict[int, Worker] = {}
        self._link = TemplateLink(tools, hooks, kill_grace, self._workers)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._link.ctrl, selectors.EVENT_READ, None)
        self._wake = WakePipe()  # Executor.cancel() from another thread interrupts select
        HOST_FDS.update(self._wake.fds)
        self._sel.register(self._wake.fd, selectors.EVENT_READ, _WAKE)
        self._next_wid = 0
        self._ewma: dict[str, float] = {}
        self._hub = Hub(self)
        self._tool_frames: list[bytes] = []  # tools added later, for the workers (sent by the driver)
        self._owed_tools: dict[int, list[bytes]] = {}  # worker id -> tool frames it gets before its next call
        for _ in range(workers):
            self._spawn()
        for w in list(self._workers.values()):
            self._wait_pid(w)
        self._idle: deque[Worker] = deque(self._workers.values())
        self._hub.watch()  # deadlines and cancels are kept while no batch owner drives

    # ----------------------------------------------------------------- workers

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the current workers (waiting for the template to report any being forked)."""
        if self._closed:
            return []
        return [self._wait_pid(w) for w in list(self._workers.values())]

    @property
    def template_pid(self) -> int | None:
        return self._link.pid

    def _spawn(self) -> Worker:
        wid = self._next_wid
        self._next_wid += 1
        call_w, result_r, side = self._link.spawn(wid)
        w = Worker(wid, call_w, result_r, oob.SidePort(side))
        self._workers[wid] = w
        self._sel.register(result_r, selectors.EVENT_READ, w)
        return w

    def _wait_pid(self, w: Worker) -> int:
        return self._link.wait_pid(w)

    # ----------------------------------------------------------------- for the line lane
    # The lane (fork_lines) runs its own items on these workers while it holds the driver lock; these
    # are all it uses of the pool.

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def template_gone(self) -> bool:
        return self._link.gone

    @property
    def drive(self) -> threading.Lock:
        """The Hub's driver lock: whoever holds it runs the workers."""
        return self._hub.drive

    @property
    def workers(self) -> Mapping[int, Worker]:
        """Worker id -> live worker (the pool's own table: read it, never change it)."""
        return self._workers

    @property
    def idle(self) -> deque[Worker]:
        """Workers with nothing sent; a client that sends one work takes it out, and puts it back when
        it is idle again."""
        return self._idle

    @property
    def estimates(self) -> dict[str, float]:
        """Tool name -> recent mean duration (s), which ``is_quick`` reads; updated by ``learn``."""
        return self._ewma

    def is_quick(self, name: str) -> bool:
        return self._is_quick(name)

    def learn(self, name: str, duration: float) -> None:
        self._learn(name, duration)

    def wait_pid(self, w: Worker) -> int:
        """``w``'s pid, waiting for the template to report it."""
        return self._link.wait_pid(w)

    def exit_description(self, w: Worker) -> tuple[str, str]:
        """(error type, message) for a dead worker's exit (waiting a moment for its status)."""
        return self._exit_description(w)

    def check_template(self) -> None:
        """Continue a stopped template (looked at most every ``TEMPLATE_CHECK_S``)."""
        self._link.check()

    def take_deaths(self) -> set[int] | None:
        """Pids the template reported dead since the last call, or None if none."""
        return self._link.take_deaths() if self._link.deaths else None

    def drop(self, w: Worker, *, kill: bool) -> None:
        """``w`` leaves the pool (stopped by its template if ``kill``); a fresh worker takes its slot."""
        if w in self._idle:
            self._idle.remove(w)
        self._retire(w, kill=kill)
        self._refill(w)

    def select(self, timeout: float | None, extra_fd: int | None = None,
               extra: object = None) -> list[Any]:
        """Wait up to ``timeout`` for the workers (and ``extra_fd``, whose key data is ``extra``); the
        template's messages and wake-ups are handled here. Returns the workers with something to read
        (still in the pool) and ``extra`` if its fd is ready."""
        sel = self._sel
        if extra_fd is not None:
            sel.register(extra_fd, selectors.EVENT_READ, extra)
        try:
            ready = sel.select(timeout)
        finally:
            if extra_fd is not None:
                sel.unregister(extra_fd)
        out: list[Any] = []
        for key, _ in ready:
            data = key.data
            if self._own_key(data):
                continue
            if data is extra or data.wid in self._workers:
                out.append(data)
        return out

    def _own_key(self, data: object) -> bool:
        """Handle a ready selector key of the pool's own (the template's messages, a wake-up); False
        for any other (a worker, a batch's or the lane's wake-up fd)."""
        if data is None:
            self._link.handle()
        elif data is _WAKE:
            self._wake.drain()
        else:
            return False
        return True

    def _retire(self, w: Worker, *, kill: bool) -> None:
        """Forget a worker; if ``kill``, have the template stop its process group (with grace)."""
        pid = self._wait_pid(w) if kill else None  # while it is still ours: its "spawned" names it by wid
        self._workers.pop(w.wid, None)
        self._owed_tools.pop(w.wid, None)
        try:
            self._sel.unregister(w.result_fd)
        except (KeyError, ValueError):
            pass
        self._link.forget_fds((w.call_fd, w.result_fd, w.side.sock.fileno()))
        for fd in (w.call_fd, w.result_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        w.side.close()  # a large frame still in flight on it is freed with it
        if pid is not None:
            self._link.term(pid)

    def _exit_description(self, w: Worker) -> tuple[str, str]:
        return describe_exit(self._link.exit_status(w.pid))

    def add_tools(self, tools: list[Tool]) -> None:
        """The template learns the tools at once (workers it forks from now on have them); live workers
        get them from the driver before it starts another call, so no frame interleaves with a call's."""
        import dill

        blob = dill.dumps({t.name: t for t in tools})
        self._link.send_tools(blob)
        frame = framing.encode(frames.tools_frame(blob))
        self._hub.held(lambda: self._tool_frames.append(frame), wake=False)
        if self._hub.drive.acquire(blocking=False):
            try:
                self._hub.held(self._ship_tools, wake=False)
            finally:
                self._hub.drive.release()
        else:
            self.wake()

    def _ship_tools(self) -> None:
        """Idle workers get the new tools now; a busy one, before its next call. Never written to a
        busy worker: it does not read its call pipe while its tool runs (maybe hangs), a write could
        fill that pipe and block the driver, and no deadline would be kept meanwhile."""
        shipped, self._tool_frames = self._tool_frames, []
        for w in list(self._workers.values()):
            if w.inflight:
                self._owed_tools.setdefault(w.wid, []).extend(shipped)
                continue
            try:  # an idle worker reads them at once
                for frame in shipped:
                    framing.write_all(w.call_fd, frame)
            except OSError:  # it died: its replacement is forked from a template that has the tools
                if w in self._idle:
                    self._idle.remove(w)
                    self._retire(w, kill=True)
                    self._refill(w)

    # ----------------------------------------------------------------- batches

    def execute(self, feed: Feed) -> Iterator[Event]:
        if self._closed:
            raise RuntimeError("this executor is closed")
        return self._hub.execute(feed)

    def cancel(self, feed: Feed) -> None:
        self._hub.request(feed)

    def hub_round(self) -> None:
        """One turn of the driver (``Hub.drive`` held): start calls, wait, route what happened."""
        if self._closed:
            raise RuntimeError("this executor is closed")
        if self._link.gone:
            raise TemplateGone()
        live = self._hub.held(self._begin_round, wake=False)
        if live is None:
            return
        timeout = self.next_deadline()
        if timeout is not None:
            timeout = max(0.0, timeout - time.monotonic())
        if any(w.pid is None and w.inflight for w in self._workers.values()):
            # Calls wait on a worker the template has not reported started: look at the template soon.
            timeout = TEMPLATE_CHECK_S if timeout is None else min(timeout, TEMPLATE_CHECK_S)
            self._link.check()
        watched = []
        for b in live:  # a live source with more to give wakes the driver too
            if b.feed.wakeup_fd is None:
                timeout = POLL_INTERVAL if timeout is None else min(timeout, POLL_INTERVAL)
                b.poked = True  # its owner asks the source again after this wait
            else:
                try:
                    self._sel.register(b.feed.wakeup_fd, selectors.EVENT_READ, b)
                    watched.append(b.feed.wakeup_fd)
                except (KeyError, ValueError):
                    pass
        try:
            ready = self._sel.select(timeout)
        finally:
            for fd in watched:
                self._sel.unregister(fd)
        self._after_wait(ready)

    def _begin_round(self) -> list[BatchState] | None:
        """Settle, ship tools, start calls (inside ``Hub.held``). None if calls started (their
        CallStarted events are news: delivered now, the wait is next round), else the live batches."""
        hub = self._hub
        if hub.pending:
            self._settle()
        if self._tool_frames:
            self._ship_tools()
        if self._start():
            hub.wake_owners()
            return None
        return [b for b in tuple(hub.batches) if b.feed.waiting] if hub.batches else []

    def hub_tend(self) -> None:
        """The watcher's turn (``Hub.drive`` held, nobody else driving): what came, without waiting."""
        if self._closed or self._link.gone:
            return
        self._after_wait(self._sel.select(0))

    def _after_wait(self, ready: list[tuple[selectors.SelectorKey, int]]) -> None:
        """Route what happened: frames, deaths, the template's messages; then expire and settle."""
        self._hub.held(lambda: self._route_ready(ready))

    def _route_ready(self, ready: list[tuple[selectors.SelectorKey, int]]) -> None:
        for key, _ in ready:
            data = key.data
            if self._own_key(data):
                continue
            if type(data) is BatchState:
                data.feed.drain_wakeup()
                data.poked = True
            elif data.wid in self._workers:
                self._read(data)
        if self._link.deaths:
            self._bury()
        self._expire()
        if self._hub.pending:
            self._settle()

    def hub_settle(self) -> None:
        self._hub.held(self._settle)

    def _start(self) -> int:
        """Idle workers take calls from the batches in turn: one call, or one chunk of quick calls.
        Returns how many workers were given calls."""
        idle = self._idle
        hub = self._hub
        sent = 0
        while idle:
            b = hub.next_ready()
            if b is None:
                break
            self._send(b, idle.popleft())
            sent += 1
        return sent

    def _send(self, b: BatchState, w: Worker) -> None:
        ready = b.ready
        first = ready.popleft()
        chunk = [first]
        if first.tool.fresh_process:  # a process of its own, forked from the pristine template, in w's slot
            one_shot = self._spawn()
            one_shot.lender = w
            w = one_shot
        if not first.tool.fresh_process and self._is_quick(first.call.name):
            # Guided self-scheduling: never more than this worker's share of what is left (shared with
            # the workers still idle), so a call that is slower than its tool's history suggests cannot
            # hold up more than that share.
            limit = min(MAX_CHUNK, math.ceil((len(ready) + 1) / (len(self._idle) + 1)))
            while len(chunk) < limit and ready and self._is_quick(ready[0].call.name) \
                    and not ready[0].tool.fresh_process:
                chunk.append(ready.popleft())
        owed = self._owed_tools.pop(w.wid, None)  # tools added while it was busy go before its call
        try:
            if owed:
                for frame in owed:
                    framing.write_all(w.call_fd, frame)
            framing.send(w.call_fd, frames.calls_frame([
                (d.call.id, d.call.name, d.call.arguments, d.timeout, d.context or None) for d in chunk
            ]), w.side)
        except OSError:  # the worker died while idle: its calls never started
            self._retire(w, kill=False)
            self._refill(w)
            ready.extendleft(reversed(chunk))
            return
        w.inflight.extend(chunk)
        w.start_next(time.monotonic())
        if not b.abandoned:
            b.events.extend([CallStarted(d.call.id, d.call.name) for d in chunk])

    def _is_quick(self, name: str) -> bool:
        mean = self._ewma.get(name)
        return mean is not None and mean < QUICK_CALL_S

    def _learn(self, name: str, duration: float) -> None:
        prev = self._ewma.get(name)
        self._ewma[name] = duration if prev is None else 0.8 * prev + 0.2 * duration

    def _read(self, w: Worker) -> None:
        """The hot path: every result frame of every call passes here once."""
        frames = w.reader.read()
        if frames:
            inflight = w.inflight
            finished = False
            ewma = self._ewma
            pid = w.pid
            for f in frames:
                if not inflight:  # the result of a call already settled by an unreadable frame
                    continue
                current = inflight[0]
                kind = f[0]
                if kind == PROGRESS:
                    if f[1] == current.call.id:
                        self._route(current, CallProgress(f[1], f[2]))
                    continue
                if kind == framing.BAD_FRAME:
                    # A frame the host could not rebuild (a value whose class cannot be unpickled here).
                    # Progress is checked in the worker, so it was this call's result: fail this call only.
                    inflight.popleft()
                    self._finish(current, unreadable_result(current.call.id, current.call.name, f, pid,
                                                            time.monotonic() - w.started_at))
                    finished = True
                    continue
                cid = f[1]
                if cid != current.call.id:  # a late result of a call settled by an unreadable frame
                    continue
                inflight.popleft()
                name = current.call.name
                result, duration = rebuilt_result(f, name, pid)
                self._route(current, CallFinished(cid, result))
                if kind == LEAVING:  # its tool damaged the worker's channels: the worker goes
                    self._replace(w)
                    return
                prev = ewma.get(name)
                ewma[name] = duration if prev is None else 0.8 * prev + 0.2 * duration
                finished = True
                if w.lender is not None:
                    break
            # A result starts the next call's clock; progress alone must not reset the running one's.
            if finished and inflight:
                w.start_next(time.monotonic())
            elif finished:
                w.deadline = None
                if w.lender is None:
                    self._idle.append(w)
                else:  # a one-shot worker is done: it leaves (what it started dies with it)
                    self._retire(w, kill=False)
                    self._refill(w)
        if w.reader.eof:
            self._crashed(w)

    def _refill(self, gone: Worker) -> None:
        """A worker left the pool: its slot goes to its lender (a one-shot's), else to a new worker. A
        lender that left while its slot is lent gets no replacement: the one-shot holds that slot, and
        finding its lender gone when it is done, hands the slot to a new worker then (one slot, one
        worker: the pool never grows past its size)."""
        if gone.lender is not None:
            lender, gone.lender = gone.lender, None
            if lender.wid in self._workers:
                self._idle.append(lender)
                return
        elif any(w.lender is gone for w in tuple(self._workers.values())):
            return
        self._idle.append(self._spawn())

    def _bury(self) -> None:
        """Workers the template reported dead that we still count as ours: take what they wrote, then
        treat them as crashed (a worker never exits by itself while its call pipe is open)."""
        dead = self._link.take_deaths()
        for w in [w for w in self._workers.values() if w.pid in dead]:
            self._read(w)
            if w.wid in self._workers:
                self._crashed(w)

    # The Hub's route rule, under the names this module's paths use.
    _route = staticmethod(Hub.route)
    _finish = staticmethod(Hub.finish)

    def _replace(self, w: Worker) -> None:
        """A worker that must not take another call (it said it leaves): the calls behind its current
        one never started and go back; it is stopped and a fresh worker takes the slot."""
        self._requeue(w, died=False)
        if w in self._idle:
            self._idle.remove(w)
        self._retire(w, kill=True)
        self._refill(w)

    def _crashed(self, w: Worker) -> None:
        if w.reader.damaged is not None:  # bytes that are not a frame: fail its call, replace it
            if w.inflight:
                current = w.inflight.popleft()
                log.warning("worker %s (tool %r, call %s): %s", w.pid, current.call.name, current.call.id,
                            w.reader.damaged)
                self._finish(current, damaged_result(current.call.id, current.call.name, w.reader.damaged, w.pid,
                                                     time.monotonic() - w.started_at))
            self._replace(w)
            return
        self._wait_pid(w)  # its exit status is reported by pid: learn the pid before forgetting the worker
        self._retire(w, kill=False)
        if w in self._idle:
            self._idle.remove(w)
        if w.inflight:
            current = w.inflight.popleft()
            described = self._exit_description(w)
            log.warning("worker %s died running tool %r (call %s): %s", w.pid, current.call.name,
                        current.call.id, described[1])
            self._finish(current, crashed_result(current.call.id, current.call.name, described, w.pid,
                                                 time.monotonic() - w.started_at))
            self._requeue(w, died=True)
        self._refill(w)

    def _requeue(self, w: Worker, *, died: bool) -> None:
        """Calls queued behind a stopped worker's current call never started: run them elsewhere. Only
        a worker that died counts against them (a call that keeps killing workers fails instead)."""
        by_batch: dict[int, list[Dispatch]] = {}
        for d in w.inflight:
            b = d.batch
            if d.stopped or b is None or b.abandoned:
                continue
            if died:
                d.requeues += 1
                if d.requeues > MAX_REQUEUES:
                    self._finish(d, not_started_result(d.call.id, d.call.name, d.requeues, w.pid))
                    continue
            by_batch.setdefault(id(b), []).append(d)
        w.inflight.clear()
        for back in by_batch.values():
            back[0].batch.ready.extendleft(reversed(back))  # type: ignore[union-attr]

    def next_deadline(self) -> float | None:
        """The earliest deadline of a running call, or None. Any thread: the watcher asks while an owner
        may change the workers (a snapshot of them, taken in one step)."""
        deadlines = [w.deadline for w in tuple(self._workers.values()) if w.deadline is not None]
        return min(deadlines) if deadlines else None

    def _expire(self) -> None:
        now = time.monotonic()
        for w in list(self._workers.values()):
            if w.deadline is None or now < w.deadline:
                continue
            current = w.inflight.popleft()
            elapsed = now - w.started_at
            self._learn(current.call.name, elapsed)  # a tool that hangs is no longer sent in chunks
            log.warning("tool %r (call %s) passed its timeout of %ss; killing worker %s", current.call.name,
                        current.call.id, current.timeout, w.pid)
            self._finish(current, timeout_result(current.call.id, current.call.name, current.timeout, w.pid,
                                                 elapsed))
            self._requeue(w, died=False)
            self._retire(w, kill=True)
            self._refill(w)

    def wake(self) -> None:
        self._wake.wake()

    def _settle(self) -> None:
        """Act on cancelled, stopped and abandoned batches (inside ``Hub.held``) by the Hub's rule: a worker
        running one of their calls is killed and replaced; calls not started are dropped."""
        self._hub.settle(self._placed, self._kill_running)

    def _placed(self, b: BatchState) -> list[tuple[Dispatch, bool]]:
        """``b``'s calls on workers: each worker's first is running, the rest of its chunk waits."""
        placed: list[tuple[Dispatch, bool]] = []
        for w in self._workers.values():
            if w.inflight and w.inflight[0].batch is b:  # a worker's calls all come from one batch
                placed.extend((d, i == 0) for i, d in enumerate(w.inflight))
        return placed

    def _kill_running(self, stopped: list[Dispatch]) -> None:
        """Their results went already: kill their workers; what waited behind them (and was not
        stopped) goes back to its batch."""
        ids = {id(d) for d in stopped}
        for w in [w for w in self._workers.values() if w.inflight and id(w.inflight[0]) in ids]:
            w.inflight.popleft()
            self._requeue(w, died=False)
            self._retire(w, kill=True)
            self._refill(w)

    # ----------------------------------------------------------------- shutdown

    def close(self) -> None:
        """Every batch still running gets "cancelled" for what it had pulled; then every process goes.
        Waits for the driver to finish its round (it is woken) so no pipe is closed under it."""
        if self._closed:
            return
        self.wake()
        hub = self._hub
        hub.unwatch()
        driving = hub.drive.acquire(timeout=self._kill_grace + 5.0)
        try:
            if not hub.held(self._cancel_everything):
                return
            if driving:
                self._shutdown()
            else:  # the driver never let go (a hook that calls close() from inside a wait): kill, close nothing
                self._kill_everything()
        finally:
            if driving:
                hub.drive.release()
            hub.wake_owners()

    def _cancel_everything(self) -> bool:
        """Closing (inside ``Hub.held``): every call sent or ready is reported "cancelled". False if
        another thread closed the pool first."""
        if self._closed:
            return False
        self._closed = True
        for w in list(self._workers.values()):
            for i, d in enumerate(list(w.inflight)):
                if type(d) is Dispatch:  # else a line of a lane cut short: nobody waits for it
                    self._finish(d, cancelled(d, running=i == 0).result)
        for b in list(self._hub.batches):
            for d in list(b.ready):
                self._finish(d, cancelled(d).result)
            b.ready.clear()
        return True

    def _shutdown(self) -> None:
        link = self._link
        link.check(now=True)  # a stopped template could neither let its workers go nor kill them
        pids = [w.pid for w in self._workers.values() if w.pid is not None]
        for w in list(self._workers.values()):
            self._retire(w, kill=bool(w.inflight))  # idle workers leave on EOF of their call pipe
        self._idle.clear()
        link.shutdown(pids)
        HOST_FDS.difference_update(self._wake.fds)
        self._wake.close()
        self._sel.close()

    def _kill_everything(self) -> None:
        self._link.kill([w.pid for w in list(self._workers.values()) if w.pid is not None])


__all__ = ["TEMPLATE_CHECK_S", "ForkBackend", "TemplateGone", "Worker", "crashed_result", "describe_exit",
           "not_started_result", "timeout_result"]
