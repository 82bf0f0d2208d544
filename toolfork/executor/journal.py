"""A journal of the calls that started, so a batch that died is resumed without guessing.

A call with a side effect (an email sent, a row inserted, a payment) that was running when its job
died (SIGKILL, a lost machine, an OOM kill) may or may not have acted. Running it again on resume could
act twice; skipping it could lose it. The journal makes that case visible: a call's start is written
before the call is handed to the backend (so before any worker can run it), and on resume a call
that started but has no result is reported as ``OutcomeUnknown`` instead of being started again,
unless its tool is ``idempotent=True`` or the user asked for ``rerun_unknown``.

Data flow::

    Executor._dispatches ── Journal.admit(call, tool) ──> a result instead of running it (finished
        │                         │                       before, or OutcomeUnknown), or None:
        │                         └── os.write '{"started": id, "key": K}' (+ fdatasync when durable)
        ▼
    backend (fork pool, line lane, sequential, Ray) ──> CallFinished ──> Journal.finish(result)
                                                          ('{"finished": id, "key": K, "result": …}')

An entry answers only the same call: its key ``K`` is a hash of the call's id, tool and canonical
arguments (``match="call"``, the default: an agent whose turns reuse ``call_0`` never gets another
call's result), the caller's own key (``match=callable``), or the id alone (``match="id"``: ``toolfork
run``, whose ids are unique in a job and whose input is checked whole, see ``commands/_fingerprint``).

The file is JSON lines, appended, one entry a line: ``{"job": KEY, "match": …, "about": …}`` first (the
job key behind ``ToolRuntime.idempotency_key``, kept for every resume; how entries are matched; what
the job was started on, for its owner to compare), ``{"writer": PID}`` each time a process opens it,
then the starts and, when the journal keeps results (an embedding program's batch), the results.
``toolfork run`` keeps no results here: a call's end is its record in OUT, which resume reads anyway.
Any other line is damage, refused naming the file and the line (``JournalError``); so is a file that is
not a regular file (a FIFO would hang the reader: it is opened without blocking and checked first).

One writer: the journal is opened under an exclusive OS lock (``oslock``) held until ``close()``; a
second ``Journal`` on the file, in this process or another, raises ``JournalBusy`` naming the holder.
The lock dies with its process, so a SIGKILLed job never blocks its resume.

Durability: every entry is one ``os.write`` of whole lines, unbuffered, so a SIGKILL of the process
loses no entry that was written (the kernel has it). ``durable=True`` also calls ``fdatasync`` before
the call is handed on, so the entry survives a power loss too. A trailing partial entry (a crash inside
the write) is cut off when the journal is opened again, as ``toolfork run --resume`` does with OUT.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from toolfork.executor import oslock
from toolfork.executor.closable import Closable
from toolfork.executor.idset import IdSet
from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire import write_all
from toolfork.tools.runtime import JOB_CONTEXT_KEY

if TYPE_CHECKING:
    from toolfork.tools import Tool

OUTCOME_UNKNOWN = "OutcomeUnknown"
UNKNOWN_MESSAGE = ("the job stopped while this call ran: its effect may or may not have happened, so it was "
                   "not run again (declare the tool idempotent=True, or resume with --rerun-unknown, to run it "
                   "again)")

# A caller's own key of a call: (id, tool name, arguments) -> a string.
CallKey = Callable[[str, str, Mapping[str, Any]], str]


class JournalError(ValueError):
    """The journal file cannot be used (not a journal, damaged, not a regular file, unreadable)."""


class JournalBusy(JournalError):
    """Another ``Journal`` (this process or another) has the file open: a journal has one writer."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


def call_key(call_id: str, name: str, arguments: Mapping[str, Any]) -> str:
    """The default key of a call: its id, tool and arguments (canonical JSON), hashed."""
    text = json.dumps([call_id, name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Journal(Closable):
    """Starts (and, with ``keep_results``, results) of a batch's calls in one appended file.

    ``Executor.run(calls, journal=Journal(path))`` (also ``stream``, ``imap``, ``imap_unordered``)
    writes a call's start before the call can run and its result when it finishes. Running the same
    batch again with the same path resumes it: finished calls get their recorded result without running,
    calls that started and never finished get an ``OutcomeUnknown`` error result (or run again when the
    tool is ``idempotent=True`` or ``rerun_unknown=True``), the rest run. A call is the same call when
    its id, tool and arguments are (``match``: see the module docstring). Use it as a context manager,
    or call ``close()``; until then no other ``Journal`` can open the file (``JournalBusy``).

    ``new=True`` starts the file afresh (after taking its lock); ``about`` (JSON data) is recorded in a
    new journal's first line and read back as ``journal.about``.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = False, rerun_unknown: bool = False,
                 keep_results: bool = True, match: str | CallKey = "call", new: bool = False,
                 about: Any = None) -> None:
        self.path = os.fspath(path)
        self.durable = durable
        self.rerun_unknown = rerun_unknown
        self.keep_results = keep_results
        if match not in ("call", "id") and not callable(match):
            raise ValueError(f'Journal(match=...) must be "call", "id" or a function (id, name, arguments) -> '
                             f"str, got {match!r}")
        self._match = match
        self._started = IdSet()  # keys started in an earlier run (this run's starts are only written)
        self._finished: dict[str, dict[str, Any]] = {}
        self._keys: dict[str, str] = {}  # call id -> key, for the calls of this run until they finish
        self.job_key = ""
        self.about: Any = None
        self.fresh = False  # True when this open started the journal (no earlier entries)
        self.marked: Any = None  # the owner's last note (``mark``), None when cleared
        self.since_mark: IdSet | None = None  # the keys started since that note, while it stands
        self.fd = -1
        try:
            # O_NONBLOCK: a FIFO in the journal's place must not hang the open (it is refused below).
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK, 0o666)
        except OSError as exc:
            raise JournalError(f"cannot open the journal {self.path!r}: {exc.strerror}") from exc
        try:
            mode = os.fstat(self.fd).st_mode
            if not stat.S_ISREG(mode):
                raise JournalError(f"{self.path!r} is not a toolfork journal: it is not a regular file "
                                   f"({_kind(mode)})")
            try:
                oslock.take(self.fd, self.path)
            except oslock.FileBusy as busy:
                pid = busy.pid if busy.pid is not None else self._last_writer()
                who = f"process {pid}" if pid is not None else "another process"
                raise JournalBusy(f"the journal {self.path!r} is in use by {who}: a job has one writer at a time "
                                  "(wait for it to end, or stop it)", pid) from None
            if new:
                os.ftruncate(self.fd, 0)
            self._load()
            if not self.job_key:
                self.job_key = secrets.token_hex(16)
                self.fresh = True
                head: dict[str, Any] = {"job": self.job_key, "match": self._match_name}
                if about is not None:
                    head["about"] = about
                self.about = about
                self._append(json.dumps(head, ensure_ascii=True, default=str).encode() + b"\n")
            self._append(b'{"writer": %d}\n' % os.getpid())
        except BaseException:
            self.close()
            raise

    @property
    def _match_name(self) -> str:
        return self._match if isinstance(self._match, str) else "caller"

    def _last_writer(self) -> int | None:
        """The pid of the last ``{"writer": PID}`` entry (where ``/proc/locks`` cannot name the holder)."""
        try:
            with open(self.fd, "rb", closefd=False) as f:
                f.seek(max(0, os.fstat(self.fd).st_size - 65536))
                for line in reversed(f.read().splitlines()):
                    if line.startswith(b'{"writer": '):
                        return int(json.loads(line)["writer"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def _load(self) -> None:
        keep = 0
        with open(self.fd, "rb", closefd=False) as f:
            f.seek(0)
            for number, line in enumerate(f, 1):
                if not line.endswith(b"\n"):  # a partial last entry: the writer died inside its write
                    break
                keep += len(line)
                self._read_entry(number, line)
        if os.fstat(self.fd).st_size > keep:
            os.ftruncate(self.fd, keep)

    def _read_entry(self, number: int, line: bytes) -> None:
        where = f"{self.path!r}, line {number}"
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            entry = None
        if number == 1:
            if not isinstance(entry, dict) or not isinstance(entry.get("job"), str) or not entry["job"]:
                raise JournalError(f"{self.path!r} is not a toolfork journal: line 1 holds no job key "
                                   f"({_shown(line)})")
            match = entry.get("match", "id")  # journals before "match" was recorded were keyed by id
            if match != self._match_name:
                raise JournalError(f"{where}: this journal matches calls by {match!r}, not by "
                                   f"{self._match_name!r}: open it with Journal(match={match!r})")
            self.job_key = entry["job"]
            self.about = entry.get("about")
            return
        if isinstance(entry, dict) and len(entry) <= 3:
            started, finished, key = entry.get("started"), entry.get("finished"), entry.get("key", None)
            if isinstance(started, str) and set(entry) <= {"started", "key"} and isinstance(key, (str, type(None))):
                self._started.add(key if key is not None else started)
                if self.since_mark is not None:
                    self.since_mark.add(key if key is not None else started)
                return
            if isinstance(finished, str) and isinstance(entry.get("result"), dict) and \
                    set(entry) <= {"finished", "key", "result"} and isinstance(key, (str, type(None))):
                self._finished[key if key is not None else finished] = entry["result"]
                return
            if set(entry) == {"writer"} and type(entry["writer"]) is int:
                return
            if set(entry) == {"about"}:  # restated by the job's owner (see ``restate``)
                self.about = entry["about"]
                return
            if set(entry) == {"mark"}:  # the owner's note (see ``mark``)
                self._mark(entry["mark"])
                return
        raise JournalError(f"{where} is not a journal entry ({_shown(line)}): the journal is damaged or is "
                           "not a toolfork journal")

    # ------------------------------------------------------------------ asking

    def key(self, call_id: str, name: str, arguments: Mapping[str, Any] | None) -> str:
        """The key this journal matches a call by (see the module docstring)."""
        match = self._match
        if match == "id":
            return call_id
        if match == "call":
            return call_key(call_id, name, arguments or {})
        assert callable(match)
        key = match(call_id, name, arguments or {})
        if not isinstance(key, str):
            raise TypeError(f"Journal(match=...) must return a str, got {type(key).__name__} for call {call_id!r}")
        return key

    def started(self, key: str) -> bool:
        """Whether an earlier run of this job started the call with this key (whatever became of it); a
        run does not ask about its own calls (their ids are unique within it)."""
        return key in self._started

    def should_run(self, key: str, tool: Tool | None) -> bool:
        """Whether the call may start: it never started, or starting it again is safe or asked for."""
        return key not in self._started or self.rerun_unknown or bool(tool is not None and tool.idempotent)

    def admit(self, call_id: str, name: str, tool: Tool | None,
              arguments: Mapping[str, Any] | None = None) -> ToolResult | None:
        """The result to give instead of running the call (recorded earlier, or ``OutcomeUnknown``), or
        None: the call may run, and its start is in the journal now (durable: on the disk; a sync a call,
        where the line lane of ``toolfork run`` syncs once for all the lines it is about to send)."""
        key = self.key(call_id, name, arguments)
        if key != call_id:
            self._keys[call_id] = key  # for finish(), whatever the answer
        record = self._finished.get(key)
        if record is not None:
            result = result_from_record(record)
            result.call_id = call_id
            return result
        if not self.should_run(key, tool):
            return outcome_unknown(call_id, name)
        if key != call_id:
            self._append(b'{"started": ' + _id_json(call_id) + b', "key": ' + _id_json(key) + b"}\n",
                         sync=self.durable)
        else:
            self.start([call_id])
        return None

    def call_context(self, call_id: str, context: dict[str, Any]) -> dict[str, Any]:
        """The context of an admitted call: its batch's, with a job key of its own when the journal
        matches calls by more than their ids, so ``runtime.idempotency_key`` tells apart two calls
        that share an id (an agent's turns) and stays the same on every resume of each."""
        key = self._keys.get(call_id)
        if key is None:
            return context
        return {**context, JOB_CONTEXT_KEY: f"{self.job_key}:{key}"}

    # ------------------------------------------------------------------ writing

    def start(self, call_ids: list[str]) -> None:
        """Record that these calls start, by id (one write; with ``durable``, on the disk when this
        returns). For ``match="id"`` journals; ``admit`` records the others."""
        if not call_ids:
            return
        self._append(b"".join([b'{"started": ' + _id_json(i) + b"}\n" for i in call_ids]), sync=self.durable)
        if self.since_mark is not None:
            for i in call_ids:
                self.since_mark.add(i)

    def finish(self, result: ToolResult) -> None:
        """Record a call's result (nothing, unless the journal keeps results)."""
        key = self._keys.pop(result.call_id, result.call_id)
        if not self.keep_results or key in self._finished:  # answered from the journal
            return
        record = result.to_dict()
        self._finished[key] = record
        entry: dict[str, Any] = {"finished": result.call_id, "result": record}
        if key != result.call_id:
            entry["key"] = key
        self._append(json.dumps(entry, ensure_ascii=True, default=str).encode() + b"\n")

    def mark(self, note: Any) -> None:
        """Record a note of the journal's owner (JSON data; None clears it), and from now on which calls
        start while it stands (``since_mark``): ``toolfork run --rerun-unknown`` notes where OUT ended, to
        put the records of the calls it ran again in place of their ``OutcomeUnknown`` ones."""
        self._append(json.dumps({"mark": note}, ensure_ascii=True, default=str).encode() + b"\n")
        self._mark(note)

    def _mark(self, note: Any) -> None:
        self.marked = note
        self.since_mark = IdSet() if note is not None else None

    def restate(self, about: Any) -> None:
        """Record what the job runs on now (``about``, JSON data): it replaces the first line's."""
        self.about = about
        self._append(json.dumps({"about": about}, ensure_ascii=True, default=str).encode() + b"\n")

    def _append(self, data: bytes, sync: bool = False) -> None:
        if self.fd < 0:
            raise JournalError(f"the journal {self.path!r} is closed")
        write_all(self.fd, data)
        if sync:
            os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            oslock.release(self.fd)
            os.close(self.fd)
            self.fd = -1


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _shown(line: bytes) -> str:
    return repr(line.rstrip(b"\n")[:80])


def _id_json(call_id: str) -> bytes:
    return json.dumps(call_id, ensure_ascii=True).encode()


def outcome_unknown(call_id: str, name: str) -> ToolResult:
    """The result of a call that started in an earlier run of the job and left no result."""
    return ToolResult(call_id, name, "error", error=ErrorInfo(OUTCOME_UNKNOWN, UNKNOWN_MESSAGE))


def result_from_record(record: dict[str, Any]) -> ToolResult:
    """A ``ToolResult`` back from its ``to_dict`` record."""
    from toolfork.tools.output import ToolOutput

    output = record.get("output")
    error = record.get("error")
    return ToolResult(str(record.get("id")), str(record.get("name")), record.get("status", "error"),
                      output=ToolOutput.from_dict(output) if isinstance(output, dict) else None,
                      error=ErrorInfo(**error) if isinstance(error, dict) else None,
                      duration_s=float(record.get("duration_s") or 0.0))


__all__ = ["OUTCOME_UNKNOWN", "UNKNOWN_MESSAGE", "CallKey", "Journal", "JournalBusy", "JournalError", "call_key",
           "outcome_unknown", "result_from_record"]
