"""The fork pool, host side: hands calls to warm forked workers and turns their frames into events.

Data flow of one batch (``ForkBackend.execute``)::

    pending deque of Dispatch ──(chunk)──> worker.call_fd ──> [worker: before_child, tool, after_child]
                                                                     │ one frame per result / progress
    events (completion order) <── FrameReader <── worker.result_fd <─┘
             ▲                                          deadlines, EOF (crash)
             └── template control socket: ("spawned", wid, pid), ("exited", pid, status)

* Chunking: a call to a tool whose observed duration is tiny is sent together with the next tiny calls
  (one write, one wake-up of the worker for many calls); a call to a slow or unknown tool goes alone,
  so quick calls never queue behind it while another worker is idle.
* Timeouts: the host knows when each worker's current call began (its previous result arrived, or it
  was sent); at the deadline it reports "timeout" at once and asks the template to SIGTERM the
  worker's process group and SIGKILL it after ``kill_grace``. The calls queued behind it in its chunk
  never started: they go back to the front of the queue. A fresh worker takes the slot.
* Crashes: EOF on a result pipe means the worker died; the template reports its wait status, which
  names the signal or exit code in the "crashed" result. No retry: tools have side effects.
"""

from __future__ import annotations

import math
import os
import pickle
import select
import selectors
import signal
import socket
import time
import weakref
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import multiprocess

from toolfork.executor import framing
from toolfork.executor.backends.base import POLL_INTERVAL, Backend, Dispatch, Feed, Hooks, cancelled, run_batch
from toolfork.executor.backends.fork_template import template_main
from toolfork.executor.types import CallFinished, CallProgress, CallStarted, ErrorInfo, Event, ToolResult
from toolfork.tools.output import ContentBlock, ToolOutput

if TYPE_CHECKING:
    from toolfork.tools.tool import Tool

QUICK_CALL_S = 0.0005  # tools whose recent calls took less than this are sent in chunks
MAX_CHUNK = 64
MAX_REQUEUES = 3  # a call whose worker died before starting it this many times fails instead
SPAWN_ACK_TIMEOUT = 10.0
PIPE_SIZE = 1 << 20
F_SETPIPE_SZ = 1031

_WAKE = object()  # selector key data of the wake-up pipe


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except (BlockingIOError, OSError):
        pass


# Host-side fds of every live pool in this process: a template forked later closes them, so it never
# keeps another pool's pipes or control socket open (which would hide EOF from that pool's processes).
_HOST_FDS: set[int] = set()


class _Worker:
    __slots__ = ("call_fd", "deadline", "inflight", "pid", "reader", "result_fd", "started_at", "wid")

    def __init__(self, wid: int, call_fd: int, result_fd: int) -> None:
        self.wid = wid
        self.pid: int | None = None
        self.call_fd = call_fd
        self.result_fd = result_fd
        self.reader = framing.FrameReader(result_fd)
        self.inflight: deque[Dispatch] = deque()  # sent, not finished; [0] is the running call
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
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = " (the OOM killer sends SIGKILL)" if sig == signal.SIGKILL else ""
        return "WorkerCrashed", f"the worker process was killed by {name}{hint}"
    return "WorkerCrashed", f"the worker process exited with code {os.WEXITSTATUS(status)}"


class ForkBackend(Backend):
    mode = "fork"

    def __init__(self, tools: dict[str, Tool], workers: int, hooks: Hooks, kill_grace: float = 1.0) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self._size = workers
        self._kill_grace = kill_grace
        self._closed = False
        self._ctrl, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ctx = multiprocess.get_context("fork")
        self._template = ctx.Process(
            target=_template_entry,
            args=(template_end, self._ctrl.fileno(), tools, hooks),
            name="toolfork-template",
            daemon=True,
        )
        self._template.start()
        template_end.close()
        _HOST_FDS.add(self._ctrl.fileno())
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._ctrl, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = os.pipe()  # Executor.cancel() from another thread interrupts select
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        _HOST_FDS.update((self._wake_r, self._wake_w))
        self._sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        self._workers: dict[int, _Worker] = {}
        self._exit_status: dict[int, int] = {}
        self._next_wid = 0
        self._ewma: dict[str, float] = {}
        for _ in range(workers):
            self._spawn()
        for w in list(self._workers.values()):
            self._wait_pid(w)
        self._finalizer = weakref.finalize(self, _emergency_close, self._template, self._ctrl)

    # ----------------------------------------------------------------- workers

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the current workers (waiting for the template to report any being forked)."""
        if self._closed:
            return []
        return [self._wait_pid(w) for w in list(self._workers.values())]

    @property
    def template_pid(self) -> int | None:
        return self._template.pid

    def _spawn(self) -> _Worker:
        call_r, call_w = os.pipe()
        result_r, result_w = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(result_r, F_SETPIPE_SZ, PIPE_SIZE)  # fewer wake-ups for large results
        except OSError:
            pass
        wid = self._next_wid
        self._next_wid += 1
        try:
            socket.send_fds(self._ctrl, [pickle.dumps(("spawn", wid))], [call_r, result_w])
        finally:
            os.close(call_r)
            os.close(result_w)
        os.set_blocking(result_r, False)
        w = _Worker(wid, call_w, result_r)
        self._workers[wid] = w
        _HOST_FDS.update((call_w, result_r))
        self._sel.register(result_r, selectors.EVENT_READ, w)
        return w

    def _handle_ctrl(self) -> None:
        """Read every message the template has sent (non-blocking)."""
        while True:
            try:
                data = self._ctrl.recv(framing.READ_CHUNK, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            if not data:
                raise RuntimeError("the toolfork template process died; the executor cannot start workers")
            msg = pickle.loads(data)
            if msg[0] == "spawned":
                w = self._workers.get(msg[1])
                if w is not None:
                    w.pid = msg[2]
            elif msg[0] == "exited":
                self._exit_status[msg[1]] = msg[2]
                if len(self._exit_status) > 4096:  # only recent ones are ever asked for
                    for pid in list(self._exit_status)[:2048]:
                        del self._exit_status[pid]

    def _wait_ctrl(self, done: Any, timeout: float) -> None:
        end = time.monotonic() + timeout
        while not done():
            left = end - time.monotonic()
            if left <= 0:
                return
            ready = select.select([self._ctrl], [], [], left)[0]
            if ready:
                self._handle_ctrl()

    def _wait_pid(self, w: _Worker) -> int:
        if w.pid is None:
            self._wait_ctrl(lambda: w.pid is not None, SPAWN_ACK_TIMEOUT)
            if w.pid is None:
                raise RuntimeError("the toolfork template did not start a worker in time")
        return w.pid

    def _retire(self, w: _Worker, *, kill: bool) -> None:
        """Forget a worker; if ``kill``, have the template stop its process group (with grace)."""
        self._workers.pop(w.wid, None)
        try:
            self._sel.unregister(w.result_fd)
        except (KeyError, ValueError):
            pass
        for fd in (w.call_fd, w.result_fd):
            _HOST_FDS.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass
        if kill:
            pid = self._wait_pid(w)
            self._ctrl.send(pickle.dumps(("term", pid, self._kill_grace)))

    def _exit_description(self, w: _Worker) -> tuple[str, str]:
        pid = w.pid
        if pid is not None:
            self._wait_ctrl(lambda: pid in self._exit_status, 2.0)
        return describe_exit(self._exit_status.pop(pid, None) if pid is not None else None)

    def add_tools(self, tools: list[Tool]) -> None:
        import dill

        blob = dill.dumps({t.name: t for t in tools})
        step = framing.READ_CHUNK // 2
        chunks = [blob[i : i + step] for i in range(0, len(blob), step)] or [b""]
        for i, chunk in enumerate(chunks):
            self._ctrl.send(pickle.dumps(("tools", i, i == len(chunks) - 1, chunk)))
        frame = framing.encode(("t", blob))
        for w in list(self._workers.values()):
            try:
                framing.write_all(w.call_fd, frame)
            except OSError:
                self._retire(w, kill=True)
                self._spawn()

    # ----------------------------------------------------------------- batches

    def execute(self, feed: Feed) -> Iterator[Event]:
        if self._closed:
            raise RuntimeError("this executor is closed")
        self._handle_ctrl()
        self._replace_dead_idle_workers()
        pending: deque[Dispatch] = deque()  # pulled (or requeued) but not sent
        idle = deque(w for w in self._workers.values() if not w.inflight)
        wakeup: list[Any] = []  # the live source's wake-up fd, while registered

        def submit(events: list[Event]) -> int:
            pulled = 0
            while idle:
                n = self._dispatch(feed, pending, idle, events)
                if n < 0:
                    break
                pulled += n
            return pulled

        def wait(events: list[Event]) -> None:
            timeout = self._next_deadline()
            if timeout is not None:
                timeout = max(0.0, timeout - time.monotonic())
            if feed.waiting and idle:  # also wake up when the live source has more
                if feed.wakeup_fd is None:
                    timeout = POLL_INTERVAL if timeout is None else min(timeout, POLL_INTERVAL)
                elif not wakeup:
                    wakeup.append(self._sel.register(feed.wakeup_fd, selectors.EVENT_READ, feed).fd)
            for key, _ in self._sel.select(timeout):
                w = key.data
                if w is None:
                    self._handle_ctrl()
                elif w is _WAKE:
                    _drain(self._wake_r)
                elif w is feed:
                    feed.drain_wakeup()
                    self._sel.unregister(wakeup.pop())
                elif w.wid in self._workers:
                    self._read(w, pending, idle, events)
            self._expire(pending, idle, events)
            if feed.cancelled:
                self._cancel_running(pending, idle, events)

        try:
            yield from run_batch(feed, submit, wait)
        finally:
            if wakeup:
                self._sel.unregister(wakeup.pop())
            if pending or any(w.inflight for w in self._workers.values()):
                self._abandon()  # the consumer stopped early or the host was interrupted

    def _next_dispatch(self, feed: Feed, pending: deque[Dispatch]) -> Dispatch | None:
        return pending.popleft() if pending else feed.pull()

    def _dispatch(self, feed: Feed, pending: deque[Dispatch], idle: deque[_Worker], events: list[Event]) -> int:
        """Send the next call (or chunk of quick calls) to an idle worker; returns how many were pulled
        from the feed (requeued calls were counted when first pulled), or -1 when there was nothing."""
        from_feed = not pending
        first = self._next_dispatch(feed, pending)
        if first is None:
            return -1
        pulled = 1 if from_feed else 0
        chunk = [first]
        if self._is_quick(first.call.name):
            # Guided self-scheduling: never more than this worker's share of what is left, so a call
            # that is slower than its tool's history suggests cannot hold up more than that share.
            hint = len(pending) + 1 if feed.exhausted or feed.size_hint is None else feed.size_hint
            limit = min(MAX_CHUNK, math.ceil(hint / self._size))
            while len(chunk) < limit:
                from_feed = not pending
                nxt = self._next_dispatch(feed, pending)
                if nxt is None:
                    break
                pulled += 1 if from_feed else 0
                if not self._is_quick(nxt.call.name):
                    pending.appendleft(nxt)
                    break
                chunk.append(nxt)
        w = idle.popleft()
        frame = framing.encode(("c", [
            (d.call.id, d.call.name, d.call.arguments, d.timeout, d.context or None) for d in chunk
        ]))
        try:
            framing.write_all(w.call_fd, frame)
        except OSError:  # the worker died while idle: its calls never started
            self._retire(w, kill=False)
            idle.append(self._spawn())
            pending.extendleft(reversed(chunk))
            return pulled
        w.inflight.extend(chunk)
        w.start_next(time.monotonic())
        for d in chunk:
            events.append(CallStarted(d.call.id, d.call.name))
        return pulled

    def _is_quick(self, name: str) -> bool:
        mean = self._ewma.get(name)
        return mean is not None and mean < QUICK_CALL_S

    def _read(self, w: _Worker, pending: deque[Dispatch], idle: deque[_Worker], events: list[Event]) -> None:
        frames = w.reader.read()
        if frames:
            finished = False
            ewma = self._ewma
            for f in frames:
                kind = f[0]
                if kind == "p":
                    events.append(CallProgress(f[1], f[2]))
                    continue
                name = w.inflight.popleft().call.name
                if kind == "o":
                    _, cid, text, data, duration = f
                    result = ToolResult(cid, name, "ok", ToolOutput([ContentBlock("text", text)], False, data),
                                        None, duration, w.pid)
                else:
                    _, cid, status, output, error, duration, ctx = f
                    result = ToolResult(cid, name, status, output, error, duration, w.pid, ctx)
                prev = ewma.get(name)
                ewma[name] = duration if prev is None else 0.8 * prev + 0.2 * duration
                events.append(CallFinished(cid, result))
                finished = True
            # A result starts the next call's clock; progress alone must not reset the running one's.
            if finished and w.inflight:
                w.start_next(time.monotonic())
            elif finished:
                w.deadline = None
                idle.append(w)
        if w.reader.eof:
            self._crashed(w, pending, idle, events)

    def _crashed(self, w: _Worker, pending: deque[Dispatch], idle: deque[_Worker], events: list[Event]) -> None:
        self._wait_pid(w)  # its exit status is reported by pid: learn the pid before forgetting the worker
        self._retire(w, kill=False)
        if w in idle:
            idle.remove(w)
        if w.inflight:
            current = w.inflight.popleft()
            etype, message = self._exit_description(w)
            events.append(CallFinished(current.call.id, ToolResult(
                current.call.id, current.call.name, "crashed",
                error=ErrorInfo(etype, f"tool '{current.call.name}' crashed: {message}"),
                duration_s=time.monotonic() - w.started_at, worker_pid=w.pid,
            )))
            self._requeue(w, pending, events)
        idle.append(self._spawn())

    def _requeue(self, w: _Worker, pending: deque[Dispatch], events: list[Event]) -> None:
        """Calls queued behind a dead worker's current call never started: run them elsewhere."""
        back = []
        for d in w.inflight:
            d.requeues += 1
            n = d.requeues
            if n > MAX_REQUEUES:
                events.append(CallFinished(d.call.id, ToolResult(
                    d.call.id, d.call.name, "crashed", worker_pid=w.pid,
                    error=ErrorInfo("WorkerCrashed", f"tool '{d.call.name}' was not run: {n - 1} workers "
                                    "died before they could start it"))))
            else:
                back.append(d)
        w.inflight.clear()
        pending.extendleft(reversed(back))

    def _next_deadline(self) -> float | None:
        deadlines = [w.deadline for w in self._workers.values() if w.deadline is not None]
        return min(deadlines) if deadlines else None

    def _expire(self, pending: deque[Dispatch], idle: deque[_Worker], events: list[Event]) -> None:
        now = time.monotonic()
        for w in list(self._workers.values()):
            if w.deadline is None or now < w.deadline:
                continue
            current = w.inflight.popleft()
            events.append(CallFinished(current.call.id, ToolResult(
                current.call.id, current.call.name, "timeout",
                error=ErrorInfo("TimeoutError", f"tool '{current.call.name}' did not finish within its "
                                f"timeout of {current.timeout}s; its worker process was killed"),
                duration_s=now - w.started_at, worker_pid=w.pid,
            )))
            self._requeue(w, pending, events)
            self._retire(w, kill=True)
            idle.append(self._spawn())

    def _replace_dead_idle_workers(self) -> None:
        for w in list(self._workers.values()):
            if w.pid is not None and w.pid in self._exit_status:
                self._exit_status.pop(w.pid, None)
                self._retire(w, kill=False)
                self._spawn()

    def wake(self) -> None:
        try:
            os.write(self._wake_w, b"!")
        except (BlockingIOError, OSError):
            pass  # already woken, or closed

    def _cancel_running(self, pending: deque[Dispatch], idle: deque[_Worker], events: list[Event]) -> None:
        """Executor.cancel(): running calls are stopped (their workers replaced), queued ones dropped."""
        for w in list(self._workers.values()):
            if w.inflight:
                events.append(cancelled(w.inflight.popleft(), running=True))
                events.extend(cancelled(d) for d in w.inflight)
                w.inflight.clear()
                self._retire(w, kill=True)
                idle.append(self._spawn())
        events.extend(cancelled(d) for d in pending)
        pending.clear()

    def _abandon(self) -> None:
        """Stop every busy worker: its results would otherwise be read as the next batch's."""
        for w in list(self._workers.values()):
            if w.inflight:
                w.inflight.clear()
                self._retire(w, kill=True)
                self._spawn()

    # ----------------------------------------------------------------- shutdown

    def close(self) -> None:
        if self._closed:
            return
        pids = [w.pid for w in self._workers.values() if w.pid is not None]
        self._closed = True
        for w in list(self._workers.values()):
            self._retire(w, kill=bool(w.inflight))  # idle workers leave on EOF of their call pipe
        try:
            self._ctrl.send(pickle.dumps(("exit", self._kill_grace)))
        except OSError:
            pass
        self._template.join(self._kill_grace + 2.0)
        if self._template.is_alive():
            self._template.kill()
            self._template.join(2.0)
            for pid in pids:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        _HOST_FDS.discard(self._ctrl.fileno())
        for fd in (self._wake_r, self._wake_w):
            _HOST_FDS.discard(fd)
            os.close(fd)
        self._sel.close()
        self._ctrl.close()
        self._finalizer.detach()


def _template_entry(ctrl: socket.socket, host_ctrl_fd: int, tools: dict[str, Any], hooks: Hooks) -> None:
    for fd in [*list(_HOST_FDS), host_ctrl_fd]:
        try:
            os.close(fd)
        except OSError:
            pass
    _HOST_FDS.clear()
    template_main(ctrl, tools, hooks)


def _emergency_close(template: Any, ctrl: socket.socket) -> None:
    """Garbage-collected without close(): closing the socket makes the template kill its workers."""
    try:
        ctrl.close()
    except OSError:
        pass
    try:
        template.join(2.0)
    except Exception:
        pass


__all__ = ["ForkBackend", "describe_exit"]
