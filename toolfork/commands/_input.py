"""The input of ``run`` and ``worker``: the non-blank lines of CALLS.jsonl or stdin, with line numbers.

A regular file is read as the executor asks for calls: it never keeps anyone waiting. A pipe or a
terminal is the co-process case, where the other side writes a line when it likes, often only after
it has read the result of the previous one. Blocking on it would freeze the calls in flight and hold
back their results, so a reader thread puts the lines in a bounded queue and iteration yields
``WAIT`` while the queue is empty: the executor keeps running what it has and asks again once
``wakeup_fd`` is readable (the thread writes a byte to that pipe for every line it queues, and at the
end of the input; the executor drains it)::

    stdin ──> reader thread ──> queue (≤ READ_AHEAD_LINES) ──> items(): (lineno, line) | WAIT
                    └── one byte a line ──> wake-up pipe ──> the executor's select()

A warm stop (the first Ctrl-C or SIGTERM, see ``_stopping``) calls ``stop()``: the input ends there, as
if the file ended, so the job finishes the lines it has taken and reads no more.

No line, whatever its bytes, stops the job: ``read_call`` turns each line into a ``ToolCall`` or a
``BadLine`` (its error record), never an exception. On top of ``parse_call``'s checks it refuses, with
a message naming what was wrong: a line longer than ``MAX_LINE_BYTES`` (skipped without being held in
memory), JSON nested too deeply to parse, arguments nested more than ``MAX_DEPTH`` levels, and numbers
that are not finite (``1e999999``, ``NaN``, ``Infinity``: JSON has no such numbers).
"""

from __future__ import annotations

import math
import os
import queue
import re
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from toolfork.commands._loading import BadLine, UsageError, parse_call
from toolfork.commands._nesting import nested_deeper_than
from toolfork.executor import WAIT
from toolfork.executor.backends.host_fds import release
from toolfork.executor.wire import WakePipe

if TYPE_CHECKING:
    from toolfork.executor import Wait

READ_AHEAD_LINES = 1024  # a fast writer can make us hold this many lines, no more
READ_CHUNK = 1 << 16
MAX_LINE_BYTES = 128 << 20  # a longer line gets an error record; its bytes are skipped, not kept
MAX_DEPTH = 128  # arguments nested deeper than this are refused
_EOF = object()


@dataclass(frozen=True, slots=True)
class LongLine:
    """Stands for a line longer than the limit, which was read past but not kept."""

    size: int

    def strip(self) -> bool:
        return True  # not blank


class LineSource:
    """Numbered non-blank lines of a byte stream; see the module docstring for the pipe case."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.stopped = False  # a warm stop: no more lines are taken
        self.wakeup_fd: int | None = None  # readable when the live queue has something new
        self._queue: queue.Queue[Any] | None = None
        if _is_regular(stream):
            return
        self._queue = queue.Queue(maxsize=READ_AHEAD_LINES)
        self._wake = WakePipe()
        self.wakeup_fd = self._wake.fd
        self._lock = threading.Lock()  # orders the thread's pipe writes against close()
        self._closed = self._reader_done = False
        threading.Thread(target=self._read, name="toolfork-input-reader", daemon=True).start()

    def wake(self) -> None:
        """Make the executor ask the source again (another thread has news for the job: the output
        writer failed). Safe from any thread; a no-op for a regular file, which never waits."""
        if self._queue is None:
            return
        with self._lock:
            if not self._closed:
                self._wake.wake()

    def stop(self) -> None:
        """End the input here (a warm stop). Called from a signal handler, in the main thread: it only
        sets a flag and pokes the wake-up pipe (without the lock, which the interrupted code may hold)."""
        self.stopped = True
        if self._queue is not None and not self._closed:
            self._wake.wake()

    @property
    def live(self) -> bool:
        """True when the input is read by a thread (a pipe or a terminal), so ``items`` may yield WAIT."""
        return self._queue is not None

    def items(self) -> Iterator[tuple[int, bytes | LongLine] | Wait]:
        """``(line number, line)`` for each non-blank line (numbers count blank lines too), until the
        end of the input; from a live input, ``WAIT`` whenever no line is there yet. The executor does
        the waiting (on ``wakeup_fd``), so it can go on with the calls in flight meanwhile."""
        lineno = 0
        for line in _file_lines(self._stream) if self._queue is None else self._queued():
            if self.stopped:
                return
            if line is WAIT:
                yield WAIT
                continue
            lineno += 1
            if line.strip():
                yield lineno, line

    def _queued(self) -> Iterator[Any]:
        q = self._queue
        assert q is not None
        while True:
            try:
                item = q.get_nowait()
            except queue.Empty:
                yield WAIT
                continue
            if item is _EOF:
                return
            if isinstance(item, BaseException):
                raise OSError(f"reading the input failed: {item}") from item
            yield item

    # ------------------------------------------------------------------------ the reader thread

    def _read(self) -> None:
        try:
            end: Any = _EOF
            try:
                for line in _lines_of(self._stream.fileno()):
                    if not self._put(line):
                        return
            except BaseException as exc:  # handed to the main thread, which reports it
                end = exc
            self._put(end)
        finally:
            with self._lock:
                self._reader_done = True
                if self._closed:
                    _close_end(self._wake.write_fd)

    def _put(self, item: Any) -> bool:
        """Queue ``item`` and wake the executor up; False once the source is closed (nobody reads)."""
        assert self._queue is not None
        while not self._closed:
            try:
                self._queue.put(item, timeout=0.1)
            except queue.Full:
                continue
            with self._lock:
                if not self._closed:
                    self._wake.wake()
            return True
        return False

    def close(self) -> None:
        """Release the wake-up pipe. The reader thread may still be blocked reading the input (the
        client keeps it open); then it closes the pipe's write end itself when it stops, so that fd
        number is never reused under it."""
        if self._queue is None:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            _close_end(self._wake.fd)
            if self._reader_done:
                _close_end(self._wake.write_fd)


def _close_end(fd: int) -> None:
    """One end of the wake-up pipe, closed by its owner: no longer the host's to keep from forks."""
    release(fd)
    os.close(fd)


def _file_lines(stream: IO[bytes], limit: int | None = None) -> Iterator[bytes | LongLine]:
    """The lines of a regular file; a line longer than ``limit`` is read past in pieces and comes as
    a ``LongLine``, so it never sits in memory whole."""
    limit = MAX_LINE_BYTES if limit is None else limit
    readline = stream.readline
    while line := readline(limit + 1):
        if len(line) <= limit:
            yield line
            continue
        size = len(line)
        while not line.endswith(b"\n") and (line := readline(READ_CHUNK)):
            size += len(line)
        yield LongLine(size)


def _lines_of(fd: int, limit: int | None = None) -> Iterator[bytes | LongLine]:
    """The lines of a descriptor, read with ``os.read``. Not through ``sys.stdin.buffer``: a thread
    blocked in a BufferedReader holds its lock, and if the program then exits (the client went away,
    Ctrl-C) while the other side keeps stdin open, the interpreter aborts at shutdown ("could not
    acquire lock for <stdin>"). A long line is joined once, not copied chunk by chunk; one longer
    than ``limit`` is dropped as it arrives and comes as a ``LongLine``."""
    limit = MAX_LINE_BYTES if limit is None else limit
    pieces: list[bytes] = []
    held = 0  # bytes in pieces
    dropped = -1  # >= 0 while skipping the rest of a line that went over the limit: bytes seen so far
    while chunk := os.read(fd, READ_CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start) + 1) > 0:
            if dropped >= 0:
                yield LongLine(dropped + end - start)
                dropped = -1
            elif held + end - start > limit:
                yield LongLine(held + end - start)
                pieces, held = [], 0
            elif pieces:
                pieces.append(chunk[start:end])
                line, pieces, held = b"".join(pieces), [], 0
                yield line
            else:
                yield chunk[start:end]
            start = end
        if start < len(chunk):
            rest = len(chunk) - start
            if dropped >= 0:
                dropped += rest
            elif held + rest > limit:
                dropped, pieces, held = held + rest, [], 0
            else:
                pieces.append(chunk[start:])
                held += rest
    if dropped >= 0:
        yield LongLine(dropped)
    elif pieces:
        yield b"".join(pieces)


# ---------------------------------------------------------------------------------- one line -> call

# Worth a look for numbers JSON does not have: NaN, Infinity, an exponent of 3+ digits, 309+ digits.
# Two substring tests and a regex with one short alternative: this runs once per line of a job.
_BIG_EXPONENT = re.compile(rb"[eE][+]?[0-9]{3}")
_LONG_NUMBER = re.compile(rb"[0-9]{309}")


def _maybe_not_finite(raw: bytes) -> bool:
    return (b"NaN" in raw or b"Infinity" in raw or _BIG_EXPONENT.search(raw) is not None
            or (len(raw) >= 309 and _LONG_NUMBER.search(raw) is not None))


def read_call(raw: bytes | LongLine, lineno: int, *, sessions: bool = False) -> Any:
    """One input line -> a ``ToolCall`` or a ``BadLine``; never raises, whatever the bytes. ``sessions``:
    see ``parse_call``."""
    here = f"line {lineno}"
    if isinstance(raw, LongLine):
        return BadLine(f"line-{lineno}", None,
                       f"{here}: the line is {raw.size} bytes long; the limit is {MAX_LINE_BYTES} bytes")
    try:
        if nested_deeper_than(raw):  # refused on every Python alike, not where the interpreter gives up
            raise RecursionError
        call = parse_call(raw, lineno, sessions=sessions)
    except RecursionError:
        return BadLine(f"line-{lineno}", None,
                       f"{here}: not valid JSON: nested too deeply to parse (arguments may be nested "
                       f"{MAX_DEPTH} levels deep at most)")
    except MemoryError:
        return BadLine(f"line-{lineno}", None, f"{here}: not enough memory to parse a line of {len(raw)} bytes")
    except Exception as exc:  # parse_call reports what it knows; anything else still gets a record
        return BadLine(f"line-{lineno}", None, f"{here}: cannot be read as a call: {type(exc).__name__}: {exc}")
    if isinstance(call, BadLine):
        return call
    deep = raw.count(b"[") + raw.count(b"{") > MAX_DEPTH
    if deep or _maybe_not_finite(raw):
        problem = _argument_problem(call.arguments, deep=deep)
        if problem is not None:
            return BadLine(call.id, call.name, f"{here}: {problem}")
    return call


def _argument_problem(arguments: dict[str, Any], *, deep: bool) -> str | None:
    """What is wrong with decoded arguments (too deep, a number that is not finite), or None."""
    stack: list[tuple[Any, str, int]] = [(arguments, "arguments", 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return (f"{path} is {value!r}: a number out of the range of a 64-bit float (or NaN/Infinity), "
                        "which JSON cannot represent")
            continue
        if isinstance(value, dict):
            children: Any = value.items()
        elif isinstance(value, list):
            children = enumerate(value)
        else:
            continue
        if deep and depth > MAX_DEPTH:
            return f"arguments are nested more than {MAX_DEPTH} levels deep (at {path[:200]}...)"
        for key, child in children:
            if isinstance(child, (dict, list, float)):
                stack.append((child, f"{path}[{key!r}]" if len(path) < 200 else path, depth + 1))
    return None


def _is_regular(stream: IO[bytes]) -> bool:
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both
        return True  # an in-memory stream without a descriptor never blocks


def open_input(path: str) -> IO[bytes]:
    """CALLS.jsonl opened for reading, or stdin for ``-``; the caller closes what is not stdin."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path!r}: {exc.strerror}") from exc


def count_lines(path: str) -> int | None:
    """Lines in a regular file, for the progress bar's total (a fast byte scan, constant memory); None
    for anything else. A pipe given by name (``<(generate)``, a FIFO) is never opened here: reading it
    would take the very lines the job is about to read, and a FIFO whose writer stalls would hold up
    the job before it starts."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        n, last = 0, b"\n"
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                n += chunk.count(b"\n")
                last = chunk[-1:]
        return n + (last != b"\n")
    except OSError:
        return None


__all__ = ["MAX_DEPTH", "MAX_LINE_BYTES", "READ_AHEAD_LINES", "LineSource", "LongLine", "count_lines",
           "open_input", "read_call"]
