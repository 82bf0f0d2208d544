"""The output of ``run`` and ``worker``: result records written as whole lines, and, for ``--resume``,
what an earlier run already wrote.

The promise both rest on: no reader (a client of the co-process, ``tail -f``, a resumed job) ever sees
half a line from us. Lines go out whole, one ``write`` holding one or more complete lines, and a job
killed in the middle of that write leaves a partial last line that ``--resume`` cuts off.

And every line is valid JSON in valid UTF-8, whatever a tool returned (see ``encode_record``):
strings holding lone surrogates (``"k\\ud800"``, which UTF-8 cannot encode) make that line ASCII with
``\\uXXXX`` escapes, non-finite floats (NaN, Infinity) become ``null``, and a record that still cannot
be written (nested too deeply, an int too long to print, a value whose ``str`` raises) is replaced by
an error record for the same id.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any

from toolfork.commands._loading import UsageError
from toolfork.commands._nesting import MAX_JSON_DEPTH, nested_deeper_than
from toolfork.commands._resume import ResumePoint
from toolfork.commands._summary import Tally
from toolfork.executor import oslock
from toolfork.executor.idset import IdSet, id_hash
from toolfork.executor.journal import OUTCOME_UNKNOWN
from toolfork.executor.wire import write_all


def result_failed(record: dict[str, Any]) -> bool:
    """A call failed when its status is not ok, or it is ok with an error output (the tool reported
    a failure the model could act on: for a job that is still a failure)."""
    if record.get("status") != "ok":
        return True
    output = record.get("output")
    return isinstance(output, dict) and bool(output.get("is_error"))


# The fields of a record that say where and when its call ran: ``duration_s`` (seconds), ``worker_pid``
# (the worker process that ran it; null for a call that ran in the toolfork process itself: sequential
# mode, inline tools, and records made without running anything) and ``started_at`` (when it started
# running, Unix time in seconds with microseconds; for a record made without running a call, when it
# was made). They differ from run to run: a resumed job's output equals an uninterrupted one's in
# everything else.
RUN_FIELDS = ("duration_s", "worker_pid", "started_at")


def record_of(result: Any, *, in_worker: bool = False) -> dict[str, Any]:
    """The output record of a ``ToolResult``: ``result.to_dict()`` and where and when it ran (see
    ``RUN_FIELDS``), or an error record for its id if that fails. ``in_worker``: made in the worker
    that ran the call (``encode_ok_result``), which is its ``worker_pid``."""
    try:
        record: dict[str, Any] = result.to_dict()
        pid = result.worker_pid
        record["worker_pid"] = pid if in_worker or pid != os.getpid() else None
        started = result.started_at
        if started is None:  # a result that did not pass the executor (made by the job), or one in its worker
            started = time.time() - result.duration_s
        record["started_at"] = int(started * 1_000_000) / 1_000_000  # to the microsecond (round() costs 4x)
        return record
    except Exception as exc:
        return _unwritable(getattr(result, "call_id", "?"), getattr(result, "name", None),
                           getattr(result, "duration_s", 0.0), exc)


def encode_ok_result(result: Any) -> bytes | None:
    """Run in a fork worker (``Executor(encode_results=...)``): the output line of an ok result, so the
    host of a job only moves bytes. None when the record had to be replaced (it cannot be written
    as it is): the host then encodes the result itself and counts the replacement as a failure."""
    data, record = encode_record(record_of(result, in_worker=True))
    return data if record.get("status") == "ok" else None


# ``json.dumps`` with these options builds an encoder per call; a line of a job needs only one.
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str).encode


def encode_record(record: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """One output line as UTF-8 bytes, and the record it holds (a replacement when the original could
    not be written; the caller counts that one as a failure).

    The common case is one ``json.dumps`` and a strict encode. A lone surrogate makes the strict
    encode fail: the line is dumped again with ``ensure_ascii``, whose ``\\udXXX`` escapes are valid
    JSON, pure ASCII, and read back by a JSON parser as the very same string. NaN and infinities,
    which JSON lacks (Python writes a bare ``NaN`` that jq and JavaScript reject), become ``null``,
    as JavaScript's ``JSON.stringify`` does. Anything else that fails replaces the record."""
    try:
        try:
            text = _dumps(record)
        except ValueError as exc:
            if "not JSON compliant" not in str(exc):  # only the non-finite floats are repaired
                raise
            record = _finite(record)
            text = _dumps(record)
        if nested_deeper_than(text):  # some Python wrote it; a reader on another could not parse it
            raise RecursionError(f"nested more than {MAX_JSON_DEPTH} levels deep")
        try:
            return (text + "\n").encode("utf-8"), record
        except UnicodeEncodeError:  # lone surrogates: escape them (the line becomes ASCII)
            return (json.dumps(record, ensure_ascii=True, allow_nan=False, default=str) + "\n").encode(
                "ascii"), record
    except Exception as exc:  # RecursionError, ValueError (an int too long), a raising __str__ ...
        replacement = _unwritable(record.get("id"), record.get("name"), record.get("duration_s"), exc,
                                  record.get("worker_pid"), record.get("started_at"))
        return (json.dumps(replacement, ensure_ascii=True) + "\n").encode("ascii"), replacement


def _finite(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` with NaN and infinities as None (containers only rebuilt, the rest kept)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth > 10_000:
        raise RecursionError("nested too deeply")
    if isinstance(value, dict):
        return {k: _finite(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, depth + 1) for v in value]
    return value


def _unwritable(call_id: Any, name: Any, duration: Any, exc: BaseException, pid: Any = None,
                started: Any = None) -> dict[str, Any]:
    """The error record that stands for a result that cannot be written as JSON."""
    try:
        why = f"{type(exc).__name__}: {exc}"
    except Exception:
        why = type(exc).__name__
    return {
        "id": call_id if isinstance(call_id, str) else str(call_id),
        "name": name if isinstance(name, str) else None,
        "status": "error",
        "output": None,
        "error": {"type": "UnwritableResultError", "traceback": "",
                  "message": f"the result of this call could not be written as JSON ({why[:1000]})"},
        "duration_s": duration if isinstance(duration, float) and math.isfinite(duration) else 0.0,
        "worker_pid": pid if type(pid) is int else None,
        "started_at": started if isinstance(started, float) and math.isfinite(started) else round(time.time(), 6),
    }


# Lines written by the background writer (``OutFile(background=True)``) may wait for it up to this many;
# past it the caller waits: memory stays bounded when the reader of our output is slower than we are.
MAX_PENDING_LINES = 4096


class OutFile:
    """Result lines, each written whole (a write of one or more complete lines), so a reader or a
    killed job never sees half a line written by us.

    ``background=True`` (``toolfork run``): a writer thread takes the lines and writes all those
    waiting in one ``write``. While results arrive faster than one write a line could go out, lines go
    out in bulk (a syscall per line cost more than the rest of a trivial call's handling); the moment
    the caller waits for the next result, the writer has the lines it has and writes them, so a
    co-process client gets each record as soon as it and the ones before it are done. ``flush()``
    waits for every line given so far and raises the writer's error (a full disk, a closed pipe)."""

    def __init__(self, fd: int | None, name: str, close: bool, background: bool = False) -> None:
        self.fd = fd  # None: sys.stdout has no descriptor (redirected in-process), write through it
        self.name = name
        self._close = close
        self._background = background and fd is not None
        self._pending: deque[tuple[bytes, int]] = deque()  # (one or more whole lines, how many)
        self._queued = 0
        self._written = 0
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        # Called from the writer thread when a write fails, so a caller waiting for input learns it.
        self.on_error: Callable[[], None] | None = None
        # False: a write never waits for the writer; the caller asks ``full()`` before it writes (the
        # line lane, whose thread also keeps the deadlines and so must never block on our reader).
        self.wait_for_room = True

    @property
    def error(self) -> BaseException | None:
        """What the background writer met (the lines after it are dropped), or None."""
        return self._error

    @classmethod
    def open(cls, path: str, *, append: bool, background: bool = False, keep: bool = False) -> OutFile:
        """``path`` ("-": stdout) locked for this process, and emptied unless ``append``; ``keep``: not
        yet, the caller calls ``empty()`` once it holds the job's other locks too."""
        if path == "-":
            return cls._private_stdout(background)
        # One writer: locked before anything changes (``oslock``); a new job empties the file only then.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as exc:
            raise UsageError(f"cannot write {path!r}: {exc.strerror}") from exc
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                oslock.take(fd, path)
                if not append and not keep:
                    os.ftruncate(fd, 0)
        except oslock.FileBusy as busy:
            os.close(fd)
            who = f"process {busy.pid}" if busy.pid is not None else "another process"
            raise UsageError(f"{path!r} is being written by {who}: an output has one writer at a time (wait for "
                             "it to end, or stop it)") from None
        except OSError as exc:
            os.close(fd)
            raise UsageError(f"cannot write {path!r}: {exc.strerror}") from exc
        return cls(fd, path, close=True, background=background)

    @classmethod
    def _private_stdout(cls, background: bool = False) -> OutFile:
        """Keep stdout for our records alone: we write to a duplicate of it, and descriptor 1 (and
        ``sys.stdout``) now lead to stderr. A tool that prints, or a library that logs to stdout (Ray
        prints worker deaths there), cannot break a line of the JSONL stream. Open it before the
        executor forks its workers, so they inherit the redirection."""
        sys.stdout.flush()
        try:
            fd = sys.stdout.fileno()
            err = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):  # redirected in-process (tests): write through it
            return cls(None, "<stdout>", close=False)
        private = os.dup(fd)
        os.dup2(err, fd)
        sys.stdout = sys.stderr
        return cls(private, "<stdout>", close=True, background=background)

    def empty(self) -> None:
        """Cut the file to nothing (a new job, once it holds its locks)."""
        if self.fd is not None and stat.S_ISREG(os.fstat(self.fd).st_mode):
            os.ftruncate(self.fd, 0)

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one record as one line (see ``encode_record``); returns the record written, which
        is a replacement error record when the original could not be written."""
        data, record = encode_record(record)
        self.write_line(data)
        return record

    def write_line(self, data: bytes, lines: int = 1) -> None:
        """Write one line already encoded by ``encode_record`` (in a worker: ``encode_ok_result``), or
        ``lines`` such lines joined."""
        if self.fd is None:
            sys.stdout.write(data.decode("utf-8"))
            sys.stdout.flush()
            return
        if self._background:
            self._enqueue(data, lines)
            return
        write_all(self.fd, data)

    def _enqueue(self, data: bytes, lines: int = 1) -> None:
        if self._error is not None:
            raise self._error
        if self._thread is None:  # started at the first line: after the executor forked its pool
            self._thread = threading.Thread(target=self._writer, name="toolfork-run-writer", daemon=True)
            self._thread.start()
        self._pending.append((data, lines))
        self._queued += lines
        if not self._wake.is_set():
            self._wake.set()
        if self.wait_for_room and self._queued - self._written > MAX_PENDING_LINES:
            with self._cond:
                while self._queued - self._written > MAX_PENDING_LINES // 2 and self._error is None:
                    self._cond.wait(0.5)

    def _writer(self) -> None:
        assert self.fd is not None
        pending = self._pending
        while True:
            self._wake.wait()
            self._wake.clear()
            while pending:
                items = [pending.popleft() for _ in range(min(len(pending), 1024))]
                lines = sum([n for _, n in items]) if len(items) > 1 else items[0][1]
                if self._error is None:
                    try:
                        write_all(self.fd, b"".join([d for d, _ in items]) if len(items) > 1 else items[0][0])
                    except BaseException as exc:  # handed to the caller by flush() or the next write
                        self._error = exc
                        if self.on_error is not None:
                            self.on_error()
                with self._cond:
                    self._written += lines
                    self._cond.notify_all()
            if self._stopping and not pending:
                return

    def full(self) -> bool:
        """Whether ``MAX_PENDING_LINES`` lines wait for the background writer (the reader of our
        output is slower than we are, or reads nothing): a caller that must not block holds its
        lines back until this is False again."""
        return self._background and self._queued - self._written > MAX_PENDING_LINES

    def flush(self) -> None:
        """Wait until every line given so far is written; raise what the writer met, if anything."""
        if self._thread is not None:
            with self._cond:
                while self._written < self._queued and self._thread.is_alive():
                    self._cond.wait(0.5)
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join()
            self._thread = None
        if self._close and self.fd is not None:
            oslock.release(self.fd)
            os.close(self.fd)
            self.fd = None


# Statuses only a call that ran can have: its start is in the job's journal.
RAN_STATUSES = frozenset({"ok", "timeout", "crashed"})


def scan_previous(path: str, started: Callable[[str], bool] | None = None, journal: str = "",
                  rerun: bool = False) -> tuple[ResumePoint, int, int, Tally]:
    """For --resume: what OUT's complete lines hold (see ``ResumePoint``), how many distinct ids, how
    many of them failed, and its records counted by status and error type. A trailing partial line (the
    job was killed mid-write) is cut off so the appended lines start clean; a complete line that is not
    a JSON record is left alone (it ends the prefix of records: past it, lines are skipped by id).

    ``started``: the job's journal, asked whether each call that ran (``RAN_STATUSES``) started in it;
    a record it never saw start means the journal (named ``journal``) is another job's or was cut short,
    a usage error naming OUT's line. ``rerun`` (``--rerun-unknown``): the ``OutcomeUnknown`` records are
    run again (``ResumePoint.rerun``), and are neither counted nor failed here."""
    done = IdSet()
    tally = Tally()
    order = array("Q")
    unknown: set[int] = set()
    count = failed = 0
    keep = 0
    try:
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    break
                keep += len(line)
                try:
                    record = json.loads(line)
                    call_id = str(record["id"])
                except (ValueError, KeyError, TypeError):
                    order.append(0)  # matches no id
                    continue
                if started is not None and record.get("status") in RAN_STATUSES and not started(call_id):
                    raise UsageError(
                        f"--resume: line {number} of {path!r} is the record of call {call_id[:200]!r}, which ran, but "
                        f"the journal {journal!r} never saw it start: that journal is another job's, or was cut "
                        "short or replaced. Put the job's own journal back beside OUT, or start the job anew "
                        "(without --resume)")
                order.append(id_hash(call_id))
                if rerun and _is_unknown(record):
                    unknown.add(len(order) - 1)
                    continue
                tally.add(record)
                if done.add(call_id):
                    count += 1
                    failed += result_failed(record)
        if os.path.getsize(path) > keep:
            os.truncate(path, keep)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UsageError(f"--resume: cannot read {path!r}: {exc.strerror}") from exc
    return ResumePoint(done, order, unknown), count, failed, tally


def _is_unknown(record: dict[str, Any]) -> bool:
    error = record.get("error")
    return isinstance(error, dict) and error.get("type") == OUTCOME_UNKNOWN


__all__ = ["RAN_STATUSES", "RUN_FIELDS", "OutFile", "encode_ok_result", "encode_record", "record_of", "result_failed",
           "scan_previous"]
