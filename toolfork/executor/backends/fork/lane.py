"""The line lane: a job's input lines run on the fork pool's workers with no per-call object in
the host.

The general path (``Executor.imap`` -> ``Hub`` -> ``ForkBackend``) builds a ``ToolCall``, a
``Dispatch``, events and a ``ToolResult`` for every call, about 17 us of host CPU each: more than a
plain Python loop spends on a whole trivial call, so on a small machine the host, not the workers,
set the pace of ``toolfork run``. The lane keeps the host to moving bytes::

    Job (toolfork run): line -> id and tool name by a strict pattern, duplicates, --resume
        │ Line (raw bytes; or, for a line the host had to read itself, its parsed arguments)
        ▼
    LineLane.ready ──(chunk of quick lines, or one line)──> worker: parse the raw line, check it is
        ▲                                                    the call the host took it for, run it
        │ "m": not the call the host took it for             (hooks), encode its output line
        │      (the Job reads it and decides again)                      │ one frame per line
        └──────── WorkerCore.read, LineLane.finished <── FrameReader <───┘
                                       line.out = the encoded line (bytes), or a ToolResult the
                                       Job turns into its record (errors, timeouts, crashes)

The rest is the worker core's (``fork.core``), the same rules the pool's calls get, because the lane
is the core's other client: the core kills a worker at its running line's deadline and sends the lines
behind it back to the front of ``ready``; EOF or the template's report of a worker's death fails the
line it ran ("crashed") and sends the rest back; a frame the host cannot rebuild fails that line only.
The lane borrows the pool's workers and its driver lock while it runs and gives them back idle: a run
that ends early (an exception, Ctrl-C) has its busy workers killed and replaced, so the executor stays
usable.

Limits a call runs under (rlimits) and worker recycling hold on the lane as on the pool: the worker
applies the limits, the core recycles. What a lane cannot do, the Job keeps off it (``lines.fits``):
inline tools (they run in the host), ``fresh_process`` tools, tools that declare ``retries``, tools
with a cap or a rate limit (their calls wait in the Hub's capped queues) and tools whose limits carry a
restriction (a process each); a job with one of those takes the general path whole.
"""

from __future__ import annotations

import os
import pickle
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from toolfork.executor.backends.fork.template_link import TemplateGone
from toolfork.executor.backends.fork.workers import Worker
from toolfork.executor.backends.hub import POLL_INTERVAL
from toolfork.executor.backends.lines import Line
from toolfork.executor.calls import stamp
from toolfork.executor.types import ToolResult
from toolfork.executor.wire import drain, frames
from toolfork.executor.wire.frames import EncodedResult, Mismatch, Progress, ResultMessage

if TYPE_CHECKING:
    import threading

    from toolfork.executor.backends.fork.core import WorkerCore

BULK_PAUSE_S = 0.001
PREFETCH_BYTES = 32 * 1024  # a chunk sent ahead to a busy worker: at most this, and half its call pipe
FRAME_SLACK = 512  # a chunk frame's bytes besides its lines (an estimate with room to spare) ...
LINE_SLACK = 96  # ... and per line (its id, name, timeout and line number)


class Borrowed(Protocol):
    """What the lane borrows of the pool (``ForkBackend``): its worker core and its driver lock."""

    @property
    def closed(self) -> bool: ...

    @property
    def core(self) -> WorkerCore: ...

    @property
    def drive(self) -> threading.Lock: ...


class LineLane:
    """Runs ``Line`` items on a ``ForkBackend``'s workers, as a client of its worker core; see the
    module docstring. Single-threaded: the Job calls ``step`` between reading lines and writing records."""

    def __init__(self, backend: Borrowed, parse: Callable[[bytes, int], Any],
                 context: dict[str, Any] | None = None) -> None:
        self._b = backend
        self._core = backend.core
        self._parse = parse
        self._context = context or None
        # What every chunk frame carries besides its lines (the parse function's name, the context).
        self._frame_bytes = len(pickle.dumps(frames.lines_frame(parse, self._context, []), pickle.HIGHEST_PROTOCOL))
        self.ready: deque[Line] = deque()  # lines to send, in input order (requeued ones at the front)
        self.mismatched: list[Line] = []  # lines a worker sent back: the Job reads them and decides again
        # Called with each chunk right before it is written to a worker (the job's journal of starts).
        self.before_send: Callable[[list[Line]], None] | None = None

    # ------------------------------------------------------------------ the Job's side

    def __enter__(self) -> LineLane:
        if self._b.closed:
            raise RuntimeError("this executor is closed")
        if not self._b.drive.acquire(timeout=5.0):
            raise RuntimeError("the executor is busy with another batch; the line lane needs it alone")
        return self

    def __exit__(self, *exc: object) -> None:
        """Workers with lines still in flight (the job stopped early) are killed and replaced, so the
        pool is idle and whole again; lines never sent are dropped with the job."""
        core = self._core
        try:
            if not self._b.closed and not core.template_gone:
                for w in list(core.workers.values()):
                    if w.inflight:
                        w.inflight.clear()
                        core.count_restart("cancel")
                        core.drop(w, kill=True)
                    w.deadline = None
        except TemplateGone:
            pass  # the error that ended the job says so, or the next use of the executor will
        finally:
            self._b.drive.release()
            self.ready.clear()

    @property
    def inflight(self) -> int:
        """Lines sent to a worker and not settled."""
        return sum(len(w.inflight) for w in self._core.workers.values())

    @property
    def busy(self) -> bool:
        return bool(self.ready) or self.inflight > 0

    def step(self, wait: bool, wakeup_fd: int | None = None, poll: bool = False) -> None:
        """Start lines on idle workers, then take what the workers sent; block until something happens
        if ``wait`` (at most until the next deadline), else only look. ``wakeup_fd``: a live input's
        wake-up pipe, watched too (and emptied when it fires); ``poll``: a live input without one,
        asked again soon."""
        core = self._core
        core.check_template(self)  # a template that died or was stopped is replaced (its lines fail or go back)
        self._start()
        timeout = 0.0
        if wait:
            # At most until the next deadline, and until the template is to be looked at again.
            timeout = max(0.0, core.next_wake() - time.monotonic())
            if poll:
                timeout = min(timeout, POLL_INTERVAL)
        if wait and self.inflight > 2 * len(core.workers):
            # Chunks of quick lines are running: let their frames pile up a moment, so one wake-up of
            # the host takes many of them (a wake-up a line cost the host more than the rest of its
            # work). The workers have their next chunks already (see _start); a deadline still wins.
            pause = min(BULK_PAUSE_S, timeout)
            if pause > 0:
                time.sleep(pause)
                timeout = max(0.0, timeout - pause)
        ready = core.select(timeout, () if wakeup_fd is None else ((wakeup_fd, self),))
        if wakeup_fd is None:
            core.take(ready, self, _nothing)
        else:
            core.take(ready, self, lambda _lane: _empty(wakeup_fd))

    # ------------------------------------------------------------------ sending

    def _start(self) -> None:
        """Idle workers take a chunk of quick lines (or one line). A worker running a chunk of quick
        lines is sent its next chunk at once, so it never waits for the host; at most one such chunk
        waits in its call pipe, and it is small enough to fit there whole (the worker has read the
        chunk it runs), so the host never blocks on a write while a line may need killing."""
        core = self._core
        idle, ready = core.idle, self.ready
        while idle and ready:
            w = idle.popleft()
            self._send(w, self._chunk(w, len(idle) + 1, None))
        if ready and core.is_quick(ready[0].name) and not core.governance.recycles:  # recycled: no more
            for w in list(core.workers.values()):
                if not ready:
                    break
                if len(w.chunks) == 1 and core.is_quick(w.inflight[-1].name):
                    room = min(PREFETCH_BYTES, core.pipe_room(w)) - self._frame_bytes
                    self._send(w, self._chunk(w, len(core.workers), room))

    def _chunk(self, w: Worker, share: int, max_bytes: int | None) -> list[Line]:
        """The next lines to send to one worker: one line, or up to that worker's share of the quick
        lines ready (``WorkerCore.chunk_limit``). With ``max_bytes``, only raw lines (whose size is
        known) whose frame stays below it; maybe none."""
        ready = self.ready
        core = self._core
        is_quick = core.is_quick
        first = ready[0]
        if max_bytes is not None and (first.raw is None or len(first.raw) + FRAME_SLACK > max_bytes):
            return []
        ready.popleft()
        chunk = [first]
        if is_quick(first.name):
            limit = core.chunk_limit(len(ready) + 1, share, w)
            size = len(first.raw or b"") + FRAME_SLACK
            while len(chunk) < limit and ready and is_quick(ready[0].name):
                if max_bytes is not None:
                    raw = ready[0].raw
                    if raw is None:
                        break
                    size += len(raw) + LINE_SLACK
                    if size > max_bytes:
                        break
                chunk.append(ready.popleft())
        return chunk

    def _send(self, w: Worker, chunk: list[Line]) -> None:
        if not chunk:
            if not w.inflight and w not in self._core.idle:
                self._core.idle.append(w)
            return
        if self.before_send is not None:
            self.before_send(chunk)
        frame = frames.lines_frame(self._parse, self._context, [
            (ln.call_id, ln.name, ln.raw, ln.arguments, ln.timeout, ln.lineno, ln.meta) for ln in chunk])
        self._core.send(w, chunk, frame, self)

    # ------------------------------------------------------------------ the core's client

    def progress(self, line: Line, msg: Progress) -> None:
        """A job has no progress events: dropped."""

    def finished(self, w: Worker, line: Line, msg: ResultMessage) -> float | None:
        kind = type(msg)
        if kind is Mismatch:  # not the call the host took it for: the Job reads it and decides again
            self.mismatched.append(line)
            return None
        line.raw = None
        if kind is EncodedResult:  # the common case: the output line itself, no result object
            line.out = msg.line  # type: ignore[union-attr]
            return msg.duration_s  # type: ignore[union-attr]
        result = msg.rebuilt(line.call_id, line.name, w.pid)
        stamp(result)  # now: the job writes it later, in input order (an encoded line has its own)
        line.out = result
        return result.duration_s

    @staticmethod
    def fail(line: Line, result: ToolResult) -> None:
        line.raw = None
        stamp(result)
        line.out = result

    @staticmethod
    def wanted(line: Line) -> bool:
        return True  # a job stops whole (__exit__), never line by line

    def put_back(self, lines: list[Line]) -> None:
        self.ready.extendleft(reversed(lines))



def _empty(fd: int) -> None:
    """The live input's wake-up pipe fired: emptied, so the next wait is for new bytes."""
    os.set_blocking(fd, False)
    drain(fd)


def _nothing(_data: Any) -> None:
    """No extra was watched."""


__all__ = ["LineLane"]
