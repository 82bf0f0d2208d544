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
        │                         └── os.write '{"started": id}' (+ fdatasync when durable)
        ▼
    backend (fork pool, line lane, sequential, Ray) ──> CallFinished ──> Journal.finish(result)
                                                                   ('{"finished": id, "result": …}')

The file is JSON lines, appended, one entry a line: ``{"job": KEY}`` first (the job key behind
``ToolRuntime.idempotency_key``, kept for every resume), then ``{"started": ID}`` and, when the journal
keeps results (an embedding program's batch), ``{"finished": ID, "result": RECORD}``. ``toolfork run``
keeps no results here: a call's end is its record in OUT, which resume reads anyway.

Durability: every entry is one ``os.write`` of whole lines, unbuffered, so a SIGKILL of the process
loses no entry that was written (the kernel has it). ``durable=True`` also calls ``fdatasync`` before
the call is handed on, so the entry survives a power loss too. A trailing partial entry (a crash inside
the write) is cut off when the journal is opened again, as ``toolfork run --resume`` does with OUT.
"""

from __future__ import annotations

import json
import os
import secrets
from typing import TYPE_CHECKING, Any

from toolfork.executor.idset import IdSet
from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire import write_all

if TYPE_CHECKING:
    from toolfork.tools import Tool

OUTCOME_UNKNOWN = "OutcomeUnknown"
UNKNOWN_MESSAGE = ("the job stopped while this call ran: its effect may or may not have happened, so it was "
                   "not run again (declare the tool idempotent=True, or resume with --rerun-unknown, to run it "
                   "again)")


class JournalError(ValueError):
    """The journal file cannot be used (not a journal, unreadable)."""


class Journal:
    """Starts (and, with ``keep_results``, results) of a batch's calls in one appended file.

    ``Executor.run(calls, journal=Journal(path))`` (also ``stream``, ``imap``, ``imap_unordered``)
    writes a call's start before the call can run and its result when it finishes. Running the same
    batch again with the same path resumes it: finished calls get their recorded result without running,
    calls that started and never finished get an ``OutcomeUnknown`` error result (or run again when the
    tool is ``idempotent=True`` or ``rerun_unknown=True``), the rest run. Use it as a context manager,
    or call ``close()``.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = False, rerun_unknown: bool = False,
                 keep_results: bool = True) -> None:
        self.path = os.fspath(path)
        self.durable = durable
        self.rerun_unknown = rerun_unknown
        self.keep_results = keep_results
        self._started = IdSet()  # started in an earlier run (this run's starts are only written)
        self._finished: dict[str, dict[str, Any]] = {}
        self.job_key = ""
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise JournalError(f"cannot open the journal {self.path!r}: {exc.strerror}") from exc
        try:
            self._load()
            if not self.job_key:
                self.job_key = secrets.token_hex(16)
                self._append(json.dumps({"job": self.job_key}).encode() + b"\n")
        except BaseException:
            os.close(self.fd)
            raise

    def _load(self) -> None:
        keep = 0
        with open(self.fd, "rb", closefd=False) as f:
            for number, line in enumerate(f, 1):
                if not line.endswith(b"\n"):  # a partial last entry: the writer died inside its write
                    break
                keep += len(line)
                try:
                    entry = json.loads(line)
                except ValueError:
                    raise JournalError(f"{self.path!r} is not a toolfork journal: line {number} is not a journal "
                                       f"entry ({line[:80]!r})") from None
                if number == 1:
                    if not isinstance(entry, dict) or not isinstance(entry.get("job"), str):
                        raise JournalError(f"{self.path!r} is not a toolfork journal (its first line holds no "
                                           "job key)")
                    self.job_key = entry["job"]
                elif "started" in entry:
                    self._started.add(str(entry["started"]))
                elif "finished" in entry and isinstance(entry.get("result"), dict):
                    self._finished[str(entry["finished"])] = entry["result"]
        if os.fstat(self.fd).st_size > keep:
            os.truncate(self.path, keep)

    # ------------------------------------------------------------------ asking

    def started(self, call_id: str) -> bool:
        """Whether an earlier run of this job started the call (whatever became of it); a run does not
        ask about its own calls (their ids are unique within it)."""
        return call_id in self._started

    def should_run(self, call_id: str, tool: Tool | None) -> bool:
        """Whether the call may start: it never started, or starting it again is safe or asked for."""
        return call_id not in self._started or self.rerun_unknown or bool(tool is not None and tool.idempotent)

    def admit(self, call_id: str, name: str, tool: Tool | None) -> ToolResult | None:
        """The result to give instead of running the call (recorded earlier, or ``OutcomeUnknown``), or
        None: the call may run, and its start is in the journal now (durable: on the disk; a sync a call,
        where the line lane of ``toolfork run`` syncs once for all the lines it is about to send)."""
        record = self._finished.get(call_id)
        if record is not None:
            return result_from_record(record)
        if not self.should_run(call_id, tool):
            return outcome_unknown(call_id, name)
        self.start([call_id])
        return None

    # ------------------------------------------------------------------ writing

    def start(self, call_ids: list[str]) -> None:
        """Record that these calls start (one write; with ``durable``, on the disk when this returns)."""
        if not call_ids:
            return
        self._append(b"".join([b'{"started": ' + _id_json(i) + b"}\n" for i in call_ids]), sync=self.durable)

    def finish(self, result: ToolResult) -> None:
        """Record a call's result (nothing, unless the journal keeps results)."""
        if not self.keep_results or result.call_id in self._finished:  # answered from the journal
            return
        record = result.to_dict()
        self._finished[result.call_id] = record
        line = json.dumps({"finished": result.call_id, "result": record}, ensure_ascii=True, default=str)
        self._append(line.encode() + b"\n")

    def _append(self, data: bytes, sync: bool = False) -> None:
        if self.fd < 0:
            raise JournalError(f"the journal {self.path!r} is closed")
        write_all(self.fd, data)
        if sync:
            os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


__all__ = ["OUTCOME_UNKNOWN", "UNKNOWN_MESSAGE", "Journal", "JournalError", "outcome_unknown", "result_from_record"]
