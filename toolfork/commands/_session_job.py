"""``toolfork run --session-factory module:function``: lines that carry a ``"session"`` key run as sessions.

Each distinct key is one session (``Executor.session``): its state is built by the factory, called with
the ``"session_args"`` of the key's first line (an object: keyword arguments; a list: positional ones;
absent: none), and its lines run on it one at a time, in input order. Sessions run beside each other,
``--workers`` of them at a time, in threads of this process (each session's calls go to its own
process in fork mode); lines without a key run in the pool as usual. Every line's record is written in
input order, as on the other paths (``Job``: bad lines, duplicate ids, ``--resume``).

At most the executor's ``max_sessions`` (``--workers`` x 8) sessions are open at once, whatever the
input: a key with no place waits for one (its lines are held in its queue) and opens when a session
ends and its process is gone (``Session.close`` returns only then). If the window fills while its first line waits for a
place that no open session can give up (none runs: their next lines lie past the window), that key's
lines get ``TooManySessions`` records instead of the job waiting for ever.

Data flow::

    LineSource ──> read_call + the line's session key ──> bad line, duplicate id: its record (held) ──┐
         │                                   │                                                        │
         │ no key: Executor.submit           │ key: SessionLine queue (input order) ──> pool thread:   │
         │                                   │      open (factory) → journal → Session.run([call])    │
         ▼                                   ▼                                                        ▼
    held: (lineno, Future | record) in input order ── done at the front ──> OutFile, one record a line

A session ends (its process and state go) after its last line: for a regular file that line is known
from a first pass over the file; from a pipe, every session ends at the end of the input.

Resume: the records of a session's first lines may be in OUT already, but its state ended with the run
that wrote them. Its remaining lines are not run on a fresh state (they would see none of the earlier
calls' changes) and get ``SessionNotResumed`` records, unless ``--replay-sessions``: then the calls done
before run again, on a fresh state, results discarded (their effects outside the state happen twice),
and the session goes on. A call the journal says started but has no record is ``OutcomeUnknown`` (see
``toolfork.executor.journal``; never ``SessionNotResumed``: it may have acted), and its session cannot
go on after it either way. Its idempotency key is the journal's job key's (``Executor.job_key``), as
every call of the job, so it is the same on every resume.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from toolfork.commands._input import LineSource, LongLine, read_call
from toolfork.commands._job import Job
from toolfork.commands._loading import BadLine
from toolfork.commands._output import record_of
from toolfork.executor import ToolCall
from toolfork.executor.journal import OUTCOME_UNKNOWN, outcome_unknown
from toolfork.executor.sessions.session import SessionLost
from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire import WakePipe, drain
from toolfork.executor.wire.pipes import readable

NOT_RESUMED = "SessionNotResumed"
FACTORY_FAILED = "SessionFactoryFailed"
TOO_MANY = "TooManySessions"
_NONE: Any = object()  # a line without "session_args"


def session_fields(raw: bytes | LongLine) -> tuple[Any, Any] | None:
    """(the line's "session", its "session_args" or ``_NONE``), or None when it has no session key (or
    is not a JSON object: ``read_call`` reports that)."""
    if isinstance(raw, LongLine) or b'"session' not in raw:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or ("session" not in obj and "session_args" not in obj):
        return None
    return obj.get("session", _NONE), obj.get("session_args", _NONE)


def last_lines(path: str) -> dict[str, int] | None:
    """Each session key's last line number in a regular file; None for anything else (a pipe given by
    name is never opened here: that would take the lines the job is about to read)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    last: dict[str, int] = {}
    with open(path, "rb") as stream:
        for lineno, line in enumerate(stream, 1):
            fields = session_fields(line) if line.strip() else None
            if fields is not None and isinstance(fields[0], str):
                last[fields[0]] = lineno
    return last


class SessionLine:
    """One session key's lines and state (see the module docstring). Its calls run in one pool thread
    at a time (``running``); ``lock`` is the job's."""

    def __init__(self, key: str, args: Any, last: int | None) -> None:
        self.key = key
        self.args = args  # the first line's session_args (_NONE: none)
        self.last = last  # its last line number, when known
        self.queue: deque[tuple[ToolCall, Future[ToolResult]]] = deque()
        self.running = False
        self.admitted = False  # it holds one of the job's session places (see SessionJob.places)
        self.ended = False  # no more lines will come
        self.session: Any = None
        self.stopped: ErrorInfo | None = None  # why its later lines do not run
        self.done_before: list[ToolCall] = []  # calls an earlier run of the job did (--resume)
        self.skipped_before = 0  # lines of it an earlier run wrote records for


class SessionJob(Job):
    """``Job`` with sessions; see the module docstring."""

    def __init__(self, executor: Any, source: LineSource, out: Any, progress: Any, done: Any, window: int,
                 journal: Any = None, *, factory: Callable[..., Any], factory_spec: str,
                 last: dict[str, int] | None = None, replay: bool = False, checkpoint: bool = False) -> None:
        super().__init__(executor, source, out, progress, done, window, journal)
        self.factory = factory
        self.factory_spec = factory_spec
        self.last = last
        self.replay = replay
        self.checkpoint = checkpoint
        self.sessions: dict[str, SessionLine] = {}
        self.places = executor.max_sessions  # sessions open at once, at most; later keys wait for a place
        self.waiting: deque[SessionLine] = deque()  # keys with lines and no place yet, first come first
        self.lock = threading.Lock()
        self.wake = WakePipe()  # a result is in: the main thread writes what it can
        self.pool = ThreadPoolExecutor(max(1, executor.workers), thread_name_prefix="toolfork-session")
        self.slots: deque[tuple[int, Future[ToolResult] | dict[str, Any]]] = deque()

    # ----------------------------------------------------------------- the main thread

    def in_flight(self) -> int:
        return sum(1 for _, slot in self.slots if not isinstance(slot, dict))

    def run(self) -> None:
        try:
            self._feed()
            with self.lock:
                for line in self.sessions.values():
                    self._end(line)
            while self.slots:
                self._write_ready(block=True)
            self.out.flush()
        finally:
            with self.lock:  # an error or Ctrl-C: the lines not started are not run, the running calls stop
                for line in self.sessions.values():
                    line.stopped = line.stopped or ErrorInfo(NOT_RESUMED, "the job stopped before this call ran")
                open_sessions = [line.session for line in self.sessions.values() if line.session is not None]
            for session in open_sessions:
                session.close()
            self.pool.shutdown(wait=True)
            self.wake.close()

    def _feed(self) -> None:
        for item in self.source.items():
            if self.out.error is not None:
                raise self.out.error
            self._write_ready(block=False)
            if not isinstance(item, tuple):  # WAIT: the other side is quiet
                self._wait(self.source.wakeup_fd)
                continue
            while len(self.slots) >= self.window:
                self._unstick()
                self._write_ready(block=True)
            self._line(*item)

    def _line(self, lineno: int, raw: bytes | LongLine) -> None:
        fields = session_fields(raw)
        call = read_call(raw, lineno, sessions=fields is not None)
        if self.resume.written(call.id):
            self.seen.add(call.id)
            self.progress.skip(lineno)
            if fields is not None and isinstance(fields[0], str) and fields[0] and not isinstance(call, BadLine):
                line = self._session(fields[0], fields[1], lineno)
                line.skipped_before += 1
                if self.replay:
                    line.done_before.append(call)
            return
        if isinstance(call, BadLine):
            if not self.seen.add(call.id):
                call.message += f"; its id {call.id!r} is also used by an earlier line"
            self._hold(lineno, call.record())
            return
        if not self.seen.add(call.id):
            self._hold(lineno, BadLine(call.id, call.name, f"line {lineno}: duplicate id {call.id!r}: an earlier "
                                                           "line has the same id").record())
            return
        if fields is None:
            self._hold(lineno, self._submit(call))
            return
        key, args = fields
        problem = _key_problem(key) or _args_problem(args)
        if problem is None:
            line = self._session(key, args, lineno)
            if args is not _NONE and args != line.args:
                problem = (f'"session_args" differ from those of the first line of session {key!r} '
                           f"({json.dumps(line.args if line.args is not _NONE else None)[:200]}): a session's "
                           "state is built once, from its first line")
        if problem is not None:
            self._hold(lineno, BadLine(call.id, call.name, f"line {lineno}: {problem}").record())
            return
        future: Future[ToolResult] = Future()
        future.add_done_callback(lambda _: self.wake.wake())
        with self.lock:
            line.queue.append((call, future))
            if line.last is not None and lineno >= line.last:
                line.ended = True
            self._start(line)
        self.slots.append((lineno, future))

    def _session(self, key: str, args: Any, lineno: int) -> SessionLine:
        line = self.sessions.get(key)
        if line is None:
            last = self.last.get(key, lineno) if self.last is not None else None
            line = self.sessions[key] = SessionLine(key, args, last)
        return line

    def _submit(self, call: ToolCall) -> Future[ToolResult]:
        ex = self.executor
        settled = self._journal(call)
        future: Future[ToolResult] = Future()
        future.add_done_callback(lambda _: self.wake.wake())
        if settled is not None:
            future.set_result(settled)
            return future
        ex.submit(call).add_done_callback(lambda done: future.set_result(_outcome(call, done)))
        return future

    def _journal(self, call: ToolCall) -> ToolResult | None:
        """The result to give instead of running the call (``Journal.admit``), or None: it may run."""
        if self.journal is None:
            return None
        return self.journal.admit(call.id, call.name, self.executor.tools.get(call.name))  # type: ignore[no-any-return]

    def _hold(self, lineno: int, slot: Future[ToolResult] | dict[str, Any]) -> None:
        if not self.slots and isinstance(slot, dict):
            self._write(slot, lineno, ran=False)
        else:
            self.slots.append((lineno, slot))

    def _write_ready(self, *, block: bool) -> None:
        """Write the records at the front that are ready; ``block``: wait for the first one if it is not."""
        slots = self.slots
        while slots:
            lineno, slot = slots[0]
            if isinstance(slot, dict):
                slots.popleft()
                self._write(slot, lineno, ran=False)
            elif slot.done():
                slots.popleft()
                result = slot.result()
                if result.encoded is not None:  # an ok result its process already wrote as a line
                    self.out.write_line(result.encoded)
                    self.progress.note_ok(1, lineno)
                else:
                    self._write(record_of(result), lineno, ran=True)
            elif block:
                self._wait(None)
                block = False
            else:
                return

    def _wait(self, fd: int | None) -> None:
        """Until a result is in (or, with ``fd``, the input has news)."""
        fds = [self.wake.fd] if fd is None else [self.wake.fd, fd]
        for f in readable(fds, None):
            drain(f)

    # ----------------------------------------------------------------- sessions (lock held)

    def _start(self, line: SessionLine) -> None:
        """A pool thread runs the line's queued calls (or closes its ended session), unless one does. A
        key whose session is not open yet needs a place: without one it waits its turn."""
        if not line.running and (line.queue or (line.ended and line.session is not None)):
            if not line.admitted and line.stopped is None:
                if self.places <= 0:
                    if line not in self.waiting:
                        self.waiting.append(line)
                    return
                self.places -= 1
                line.admitted = True
            line.running = True
            self.pool.submit(self._drain, line)

    def _release(self, line: SessionLine) -> None:
        """The line's session ended (or never opened): its place goes to the first key waiting."""
        if line.admitted:
            line.admitted = False
            self.places += 1
        while self.waiting and self.places > 0:
            self._start(self.waiting.popleft())

    def _unstick(self) -> None:
        """The window is full and its first line waits for a place that no open session will give up
        (none runs: their next lines come later in the input, past the window). That key's lines fail,
        naming the bound, instead of the job waiting for ever."""
        with self.lock:
            if not self.slots or not self.waiting or any(line.running for line in self.sessions.values()):
                return
            front = self.slots[0][1]
            for line in self.waiting:
                if any(future is front for _call, future in line.queue):
                    break
            else:
                return
            self.waiting.remove(line)
            line.stopped = ErrorInfo(TOO_MANY, (
                f"session {line.key!r} could not open: {self.executor.max_sessions} sessions were open (the "
                "executor's max_sessions: --workers x 8) and none could end before this line's turn, their next "
                "lines being further on in the input; order the input by session, or use more --workers"))
            self._start(line)

    def _end(self, line: SessionLine) -> None:
        line.ended = True
        self._start(line)

    # ----------------------------------------------------------------- sessions (pool threads)

    def _drain(self, line: SessionLine) -> None:
        """Run the session's queued calls in order; close it once its last line is done."""
        while True:
            with self.lock:
                if not line.queue:
                    line.running = False
                    closing = None
                    if line.ended:
                        closing, line.session = line.session, None
                        line.stopped = line.stopped or ErrorInfo("SessionLost", (
                            f"session {line.key!r} ended after what was its last line when the job began"))
                    elif line.session is None and line.stopped is not None:  # it never opened: no place held
                        self._release(line)
                    break
                call, future = line.queue.popleft()
            try:
                record = self._one(line, call)
            except BaseException as exc:  # never leave a line without its record
                record = _error(call, type(exc).__name__, f"the session's call failed: {exc}")
            future.set_result(record)
        if closing is not None:
            closing.close()  # returns once its process is gone: only then is its place given again
        if line.ended:
            with self.lock:
                self._release(line)
        self.wake.wake()  # it runs no more: the main thread may have to unstick the window (``_unstick``)

    def _one(self, line: SessionLine, call: ToolCall) -> ToolResult:
        if line.stopped is None and line.session is None:
            self._open(line)
        if line.stopped is not None:
            if self.journal is not None and self.journal.started(call.id):  # it may have acted: not "not run"
                return outcome_unknown(call.id, call.name)
            return ToolResult(call.id, call.name, "error", error=line.stopped)
        settled = self._journal(call)
        if settled is not None:
            if settled.error is not None and settled.error.type == OUTCOME_UNKNOWN:
                line.stopped = ErrorInfo(NOT_RESUMED, (
                    f"session {line.key!r} cannot go on: its call {call.id!r} ({call.name}) started in an earlier "
                    "run of this job and left no record, so its effect on the state is unknown"))
            return settled
        try:
            result = line.session.run([call])[0]
        except SessionLost as lost:
            line.stopped = ErrorInfo("SessionLost", str(lost))
            return ToolResult(call.id, call.name, "error", error=line.stopped)
        if line.session.lost is not None:
            line.stopped = ErrorInfo("SessionLost", str(line.session.lost))
        return result

    def _open(self, line: SessionLine) -> None:
        if line.skipped_before and not self.replay:
            line.stopped = ErrorInfo(NOT_RESUMED, (
                f"session {line.key!r} ran {line.skipped_before} of its calls in an earlier run of this job; its "
                "state ended with that run, and its later calls would run on a fresh state, so they are not run "
                "(--replay-sessions runs the earlier calls again on a fresh state first; their effects outside "
                "the state then happen twice)"))
            return
        args = line.args
        factory = (functools.partial(self.factory, *args) if isinstance(args, list)
                   else functools.partial(self.factory, **args) if isinstance(args, dict) else self.factory)
        try:
            line.session = self.executor.session(factory, checkpoint=self.checkpoint)
        except Exception as exc:
            message, _, trace = str(exc).partition("\n")  # fork mode: the factory's traceback follows
            line.stopped = ErrorInfo(FACTORY_FAILED, f"session {line.key!r}: its state could not be built by "
                                                     f"{self.factory_spec}: {message}", trace)
            return
        for done in line.done_before:  # --replay-sessions: the calls an earlier run did, again
            try:
                line.session.run([done])
            except SessionLost:
                break
            if line.session.lost is not None:
                break
        line.done_before = []
        if line.session.lost is not None:
            line.stopped = ErrorInfo("SessionLost", f"while its earlier calls were replayed: {line.session.lost}")


def _key_problem(key: Any) -> str | None:
    if key is _NONE:
        return '"session_args" without a "session" key: name the session the line belongs to'
    if not isinstance(key, str) or not key:
        kind = "an empty string" if key == "" else _kind(key)
        return f'"session" must be a non-empty string naming the line\'s session, got {kind}'
    return None


def _args_problem(args: Any) -> str | None:
    if args is _NONE or isinstance(args, (dict, list)):
        return None
    kind = _kind(args)
    return f'"session_args" must be an object (keyword arguments of the factory) or an array (positional ones), ' \
           f"got {kind}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string"}.get(type(value), "a number" if isinstance(value, (int, float))
                                                    else f"a {type(value).__name__}")


def _outcome(call: ToolCall, done: Future[ToolResult]) -> ToolResult:
    try:
        return done.result()
    except BaseException as exc:  # cancelled (the executor closed under it)
        return _error(call, type(exc).__name__, f"the call did not finish: {exc}")


def _error(call: ToolCall, kind: str, message: str) -> ToolResult:
    return ToolResult(call.id, call.name, "error", error=ErrorInfo(kind, message))


__all__ = ["SessionJob", "last_lines", "session_fields"]
