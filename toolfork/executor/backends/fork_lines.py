"""The line lane: a batch job's input lines run on the fork pool's workers with no per-call object in
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
        └──────────────────────────── LineLane._read <── FrameReader <───┘
                                       line.out = the encoded line (bytes), or a ToolResult the
                                       Job turns into its record (errors, timeouts, crashes)

The rest is the fork pool's, with the same rules and messages: the host knows when each worker's
current line began (the frame of the line before it arrived, or the chunk was sent), kills the worker
at that line's deadline, and the lines behind it in its chunk go back to the front of ``ready``; EOF
or the template's report of a worker's death fails the line it ran ("crashed") and sends the rest
back; a frame the host cannot rebuild fails that line only. The lane borrows the backend's workers and
its driver lock while it runs and gives them back idle: a batch that ends early (an exception, Ctrl-C)
has its busy workers killed and replaced, so the executor stays usable.

What a lane cannot do, the Job keeps off it (``LineLane.fits``): inline tools (they run in the host),
``fresh_process`` tools and tools that declare ``retries``; a job with one of those takes the general
path whole.
"""

from __future__ import annotations

import math
import os
import pickle
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolfork.executor import framing
from toolfork.executor.backends.base import POLL_INTERVAL
from toolfork.executor.backends.fork_pool import (
    MAX_CHUNK,
    MAX_REQUEUES,
    TEMPLATE_CHECK_S,
    ForkBackend,
    TemplateGone,
    crashed_result,
    not_started_result,
    timeout_result,
)
from toolfork.executor.wire import drain, frames
from toolfork.executor.wire.frames import (
    ENCODED,
    LEAVING,
    MISMATCH,
    PROGRESS,
    damaged_result,
    rebuilt_result,
    unreadable_result,
)

BULK_PAUSE_S = 0.001
PREFETCH_BYTES = 32 * 1024  # a chunk sent ahead to a busy worker: at most this, and half its call pipe
FRAME_SLACK = 512  # a chunk frame's bytes besides its lines (an estimate with room to spare) ...
LINE_SLACK = 96  # ... and per line (its id, name, timeout and line number)
F_GETPIPE_SZ = 1032

if TYPE_CHECKING:
    from toolfork.executor.backends.fork_pool import Worker
    from toolfork.tools.tool import Tool


@dataclass(slots=True, eq=False)
class Line:
    """One input line on its way through the lane; the Job keeps it in its output slot.

    ``raw`` is the line while nobody has checked that it is the call the host took it for (the worker
    parses it); None once checked, or for a line the host read itself (then ``arguments`` is set).
    ``out`` stays None until the line is settled: the worker's encoded output line (bytes), a
    ``ToolResult`` (an error, timeout or crash: the Job makes its record) or a record the Job made.
    """

    lineno: int
    call_id: str
    name: str
    raw: bytes | None
    arguments: dict[str, Any] | None
    timeout: float | None
    out: Any = None
    requeues: int = 0  # times a worker died before it could start this line


class LineLane:
    """Runs ``Line`` items on a ``ForkBackend``'s workers; see the module docstring. Single-threaded:
    the Job calls ``step`` between reading lines and writing records."""

    def __init__(self, backend: ForkBackend, parse: Callable[[bytes, int], Any],
                 context: dict[str, Any] | None = None) -> None:
        self._b = backend
        self._parse = parse
        self._context = context or None
        # What every chunk frame carries besides its lines (the parse function's name, the context).
        self._frame_bytes = len(pickle.dumps(frames.lines_frame(parse, self._context, []), pickle.HIGHEST_PROTOCOL))
        self.ready: deque[Line] = deque()  # lines to send, in input order (requeued ones at the front)
        self.mismatched: list[Line] = []  # lines a worker sent back: the Job reads them and decides again
        self._chunks: dict[int, deque[int]] = {}  # worker id -> sizes of the chunks sent, oldest first
        self._room: dict[int, int] = {}  # worker id -> bytes a chunk may take in its call pipe

    @staticmethod
    def fits(executor: Any) -> bool:
        """Whether ``executor`` can run a job through the lane: a fork pool, and no tool that needs the
        general path (inline, fresh_process, retries)."""
        if not isinstance(getattr(executor, "backend", None), ForkBackend):
            return False
        return all(not (t.inline or t.fresh_process or t.retries) for t in executor.tools.values())

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
        b = self._b
        try:
            if not b.closed and not b.template_gone:
                for w in list(b.workers.values()):
                    if w.inflight:
                        w.inflight.clear()
                        self._forget(w)
                        b.drop(w, kill=True)
                    w.deadline = None
        except TemplateGone:
            pass  # the error that ended the job says so, or the next use of the executor will
        finally:
            b.drive.release()
            self.ready.clear()

    @property
    def inflight(self) -> int:
        """Lines sent to a worker and not settled."""
        return sum(len(w.inflight) for w in self._b.workers.values())

    @property
    def busy(self) -> bool:
        return bool(self.ready) or self.inflight > 0

    def step(self, wait: bool, wakeup_fd: int | None = None, poll: bool = False) -> None:
        """Start lines on idle workers, then take what the workers sent; block until something happens
        if ``wait`` (at most until the next deadline), else only look. ``wakeup_fd``: a live input's
        wake-up pipe, watched too (and emptied when it fires); ``poll``: a live input without one,
        asked again soon."""
        b = self._b
        if b.template_gone:
            raise TemplateGone()
        self._start()
        timeout: float | None = 0.0
        if wait:
            deadline = b.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if poll:
                timeout = POLL_INTERVAL if timeout is None else min(timeout, POLL_INTERVAL)
            if any(w.pid is None and w.inflight for w in b.workers.values()):
                # see ForkBackend.hub_round
                timeout = TEMPLATE_CHECK_S if timeout is None else min(timeout, TEMPLATE_CHECK_S)
                b.check_template()
        if wait and self.inflight > 2 * len(b.workers):
            # Chunks of quick lines are running: let their frames pile up a moment, so one wake-up of
            # the host takes many of them (a wake-up a line cost the host more than the rest of its
            # work). The workers have their next chunks already (see _start); a deadline still wins.
            pause = BULK_PAUSE_S if timeout is None else min(BULK_PAUSE_S, timeout)
            if pause > 0:
                time.sleep(pause)
                if timeout is not None:
                    timeout = max(0.0, timeout - pause)
        for data in b.select(timeout, wakeup_fd, self):
            if data is self:
                assert wakeup_fd is not None
                os.set_blocking(wakeup_fd, False)
                drain(wakeup_fd)
            elif data.wid in b.workers:  # still ours: a read before it may have replaced it
                self._read(data)
        dead = b.take_deaths()
        if dead:
            self._bury(dead)
        self._expire()

    # ------------------------------------------------------------------ workers

    def _start(self) -> None:
        """Idle workers take a chunk of quick lines (or one line). A worker running a chunk of quick
        lines is sent its next chunk at once, so it never waits for the host; at most one such chunk
        waits in its call pipe, and it is small enough to fit there whole (the worker has read the
        chunk it runs), so the host never blocks on a write while a line may need killing."""
        b = self._b
        idle, ready = b.idle, self.ready
        while idle and ready:
            self._send(idle.popleft(), self._chunk(len(idle) + 1, None))
        if ready and self._is_quick(ready[0].name):
            chunks = self._chunks
            for w in list(b.workers.values()):
                if not ready:
                    break
                sizes = chunks.get(w.wid)
                if sizes is not None and len(sizes) == 1 and self._is_quick(w.inflight[-1].name):
                    self._send(w, self._chunk(len(b.workers), self._pipe_room(w)))

    def _pipe_room(self, w: Worker) -> int:
        """Bytes of a chunk that may wait in ``w``'s call pipe: half its capacity (a pipe can be as
        small as one page when the user has many), at most ``PREFETCH_BYTES``."""
        room = self._room.get(w.wid)
        if room is None:
            try:
                import fcntl

                room = min(PREFETCH_BYTES, fcntl.fcntl(w.call_fd, F_GETPIPE_SZ) // 2) - self._frame_bytes
            except (ImportError, OSError):
                room = 0
            self._room[w.wid] = room
        return room

    def _chunk(self, share: int, max_bytes: int | None) -> list[Line]:
        """The next lines to send to one worker: one line, or (guided self-scheduling, as
        ``ForkBackend._send``) up to that worker's share of the quick lines ready. With ``max_bytes``,
        only raw lines (whose size is known) whose frame stays below it; maybe none."""
        ready = self.ready
        first = ready[0]
        if max_bytes is not None and (first.raw is None or len(first.raw) + FRAME_SLACK > max_bytes):
            return []
        ready.popleft()
        chunk = [first]
        if self._is_quick(first.name):
            limit = min(MAX_CHUNK, math.ceil((len(ready) + 1) / share))
            size = len(first.raw or b"") + FRAME_SLACK
            while len(chunk) < limit and ready and self._is_quick(ready[0].name):
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
            if not w.inflight and w not in self._b.idle:
                self._b.idle.append(w)
            return
        b = self._b
        try:
            framing.send(w.call_fd, frames.lines_frame(self._parse, self._context, [
                (ln.call_id, ln.name, ln.raw, ln.arguments, ln.timeout, ln.lineno) for ln in chunk]), w.side)
        except OSError:  # the worker died: these lines never started (its own are settled on its EOF)
            self.ready.extendleft(reversed(chunk))
            if not w.inflight:
                self._forget(w)
                b.drop(w, kill=False)
            return
        busy = bool(w.inflight)
        w.inflight.extend(chunk)
        self._chunks.setdefault(w.wid, deque()).append(len(chunk))
        if not busy:
            now = time.monotonic()
            w.started_at = now
            w.deadline = None if chunk[0].timeout is None else now + chunk[0].timeout

    def _forget(self, w: Worker) -> None:
        """``w`` leaves the pool (killed, crashed): drop what the lane knew of it."""
        self._chunks.pop(w.wid, None)
        self._room.pop(w.wid, None)

    def _is_quick(self, name: str) -> bool:
        return self._b.is_quick(name)

    def _read(self, w: Worker) -> None:
        """The hot path: the frame of every line passes here once."""
        frames = w.reader.read()
        if frames:
            inflight = w.inflight
            ewma = self._b.estimates
            pid = w.pid
            finished = False
            settled = 0
            for f in frames:
                if not inflight:
                    continue
                current: Line = inflight[0]
                kind = f[0]
                if kind == PROGRESS:
                    continue
                if kind == framing.BAD_FRAME:  # see ForkBackend._read
                    inflight.popleft()
                    settled += 1
                    current.raw = None
                    current.out = unreadable_result(current.call_id, current.name, f, pid,
                                                    time.monotonic() - w.started_at)
                    finished = True
                    continue
                cid = f[1]
                if cid != current.call_id:  # a late result of a line settled by an unreadable frame
                    continue
                inflight.popleft()
                settled += 1
                finished = True
                if kind == MISMATCH:
                    self.mismatched.append(current)
                    continue
                current.raw = None
                name = current.name
                if kind == ENCODED:  # the common case: the output line itself, no result object
                    duration = f[3]
                    current.out = f[2]
                else:
                    current.out, duration = rebuilt_result(f, name, pid)
                    if kind == LEAVING:  # its tool damaged the worker's channels: the worker goes
                        self._replace(w)
                        return
                prev = ewma.get(name)
                ewma[name] = duration if prev is None else 0.8 * prev + 0.2 * duration
            sizes = self._chunks.get(w.wid)
            while settled and sizes:  # which of the chunks sent to w are done
                if sizes[0] > settled:
                    sizes[0] -= settled
                    break
                settled -= sizes.popleft()
            if finished and inflight:
                now = time.monotonic()
                w.started_at = now
                timeout = inflight[0].timeout
                w.deadline = None if timeout is None else now + timeout
            elif finished:
                w.deadline = None
                self._b.idle.append(w)
        if w.reader.eof:
            self._crashed(w)

    def _bury(self, dead: set[int]) -> None:
        """See ``ForkBackend._bury``."""
        b = self._b
        for w in [w for w in b.workers.values() if w.pid in dead]:
            self._read(w)
            if w.wid in b.workers:
                self._crashed(w)

    def _replace(self, w: Worker) -> None:
        """See ``ForkBackend._replace``: the lines behind its current one go back, a fresh worker comes."""
        b = self._b
        self._requeue(w, died=False)
        self._forget(w)
        b.drop(w, kill=True)

    def _crashed(self, w: Worker) -> None:
        b = self._b
        if w.reader.damaged is not None:  # see ForkBackend._crashed
            if w.inflight:
                line: Line = w.inflight.popleft()
                line.raw = None
                line.out = damaged_result(line.call_id, line.name, w.reader.damaged, w.pid,
                                          time.monotonic() - w.started_at)
            self._replace(w)
            return
        self._forget(w)
        b.wait_pid(w)
        b.drop(w, kill=False)
        if w.inflight:
            current: Line = w.inflight.popleft()
            current.raw = None
            current.out = crashed_result(current.call_id, current.name, b.exit_description(w), w.pid,
                                         time.monotonic() - w.started_at)
            self._requeue(w, died=True)

    def _requeue(self, w: Worker, *, died: bool) -> None:
        """See ``ForkBackend._requeue``: the lines behind a stopped worker's current one never started."""
        back: list[Line] = []
        for line in w.inflight:
            if died:
                line.requeues += 1
                if line.requeues > MAX_REQUEUES:
                    line.raw = None
                    line.out = not_started_result(line.call_id, line.name, line.requeues, w.pid)
                    continue
            back.append(line)
        w.inflight.clear()
        self.ready.extendleft(reversed(back))

    def _expire(self) -> None:
        b = self._b
        now = time.monotonic()
        for w in list(b.workers.values()):
            if w.deadline is None or now < w.deadline:
                continue
            current: Line = w.inflight.popleft()
            elapsed = now - w.started_at
            b.learn(current.name, elapsed)  # a tool that hangs is no longer sent in chunks
            current.raw = None
            current.out = timeout_result(current.call_id, current.name, current.timeout, w.pid, elapsed)
            self._requeue(w, died=False)
            self._forget(w)
            b.drop(w, kill=True)


def effective_timeout(tool: Tool, default: float | None) -> float | None:
    """A lane line's timeout: its tool's, else the executor's, as ``Executor`` has it (infinity: none). A
    line with a timeout of its own is read by the host, which passes that one."""
    timeout = tool.timeout if tool.timeout is not None else default
    return None if timeout == math.inf else timeout


__all__ = ["Line", "LineLane", "effective_timeout"]
