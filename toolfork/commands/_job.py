"""The general path of ``toolfork run``: every input line's record, written in input order.

Its own module so that both ways of running a job build on it without an import circle: ``run.py``
chooses between this ``Job`` (``Executor.imap``) and ``LaneJob`` (``_lane_job``, the fork pool's line
lane), which shares its rules for bad lines, duplicates and ``--resume``.

Data flow::

    LineSource (for a pipe: a reader thread and a wake-up pipe, see _input)
        │ (lineno, line) | WAIT
        ▼
    read_call ─── bad line, duplicate id ──> its record, held behind the calls before it ──┐
        │ ToolCall | WAIT                                                                 │
        ▼                                                                                 ▼
    Executor.imap ── ToolResult, call order ──> Job: every line's record in input order ──> OutFile
        │                                                                     (one write a line)
        └── journal (OUT.journal): each call's start, written before the backend gets the call; on
            --resume a call that started and has no record in OUT gets an OutcomeUnknown record
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator
from typing import Any

from toolfork.commands._idset import IdSet
from toolfork.commands._input import LineSource, read_call
from toolfork.commands._loading import BadLine
from toolfork.commands._output import OutFile, record_of, result_failed
from toolfork.commands._progress import Progress
from toolfork.commands._resume import ResumePoint
from toolfork.executor import WAIT
from toolfork.executor.journal import Journal

# Bad-line records held back behind running calls before the feeder waits for those calls: without a
# bound, a million bad lines behind one slow call would all sit in memory.
MAX_OWED_RECORDS = 1024

log = logging.getLogger("toolfork.run")


class Job:
    """Feeds the executor from the input and writes every line's record in input order.

    ``owed`` lists what is owed to the output in input order: ``None`` for a call whose result the
    executor has not returned yet, or a ready record (a bad line) that must wait behind those calls.
    """

    max_owed_records = MAX_OWED_RECORDS

    def __init__(self, executor: Any, source: LineSource, out: OutFile, progress: Progress,
                 done: IdSet | ResumePoint, window: int, journal: Journal | None = None) -> None:
        self.executor = executor
        self.journal = journal
        # What --resume skips: the lines whose records OUT holds (an IdSet alone: skipped by id).
        self.resume = done if isinstance(done, ResumePoint) else ResumePoint(done)
        self.source = source
        self.out = out
        self.progress = progress
        self.seen = IdSet()
        self.window = window
        self.owed: deque[tuple[int, dict[str, Any] | None]] = deque()
        self.owed_records = 0

    def run(self) -> None:
        results = self.executor.imap(self._calls(), window=self.window, wakeup_fd=self.source.wakeup_fd,
                                     journal=self.journal)
        for result in results:
            lineno, placeholder = self.owed.popleft()
            assert placeholder is None, "results and calls out of step"
            if result.encoded is not None:  # an ok result its worker already wrote as a line
                self.out.write_line(result.encoded)
                self.progress.note_ok(1, lineno)
            else:
                self._write(record_of(result), lineno, ran=True)
            if self.owed:
                self._emit_owed()
        assert not self.owed, "a call got no result"
        self.out.flush()  # a write error (a full disk, a closed pipe) is raised here, inside the job

    def in_flight(self) -> int:
        """Calls taken from the input whose records are not written yet (what a warm stop finishes)."""
        return len(self.owed) - self.owed_records

    def _calls(self) -> Iterator[Any]:
        """ToolCalls for the executor, in input order, or WAIT. Bad lines never reach it: their records
        are written here, or kept until the calls before them are written."""
        lines = self.source.items()
        out = self.out
        while True:
            if out.error is not None:  # the output is gone (a closed pipe, a full disk): stop reading
                raise out.error
            if self.owed_records >= self.max_owed_records:
                yield WAIT  # the calls in flight finish first; their results let the records owed behind them out
                continue
            item = next(lines, None)
            if item is None:
                return
            if not isinstance(item, tuple):  # WAIT: the other side is quiet
                yield WAIT
                continue
            lineno, raw = item
            call = read_call(raw, lineno)
            if self.resume.written(call.id):
                self.seen.add(call.id)  # as the run that wrote its record did
                self.progress.skip(lineno)
                continue
            if isinstance(call, BadLine):
                if not self.seen.add(call.id):
                    call.message += f"; its id {call.id!r} is also used by an earlier line"
                self._hold_or_write(call.record(), lineno)
                continue
            if not self.seen.add(call.id):
                bad = BadLine(call.id, call.name,
                              f"line {lineno}: duplicate id {call.id!r}: an earlier line has the same id")
                self._hold_or_write(bad.record(), lineno)
                continue
            self.owed.append((lineno, None))
            yield call

    def _hold_or_write(self, record: dict[str, Any], lineno: int) -> None:
        if self.owed:
            self.owed.append((lineno, record))
            self.owed_records += 1
        else:
            self._write(record, lineno, ran=False)

    def _emit_owed(self) -> None:
        while self.owed and self.owed[0][1] is not None:
            lineno, record = self.owed.popleft()
            self.owed_records -= 1
            assert record is not None
            self._write(record, lineno, ran=False)

    def _write(self, record: dict[str, Any], lineno: int, *, ran: bool) -> None:
        record = self.out.write(record)  # a result that cannot be written comes back as an error record
        failed = result_failed(record)
        self.progress.tally.add(record)
        self.progress.note(failed=failed, lineno=lineno, ran=ran)
        if failed and log.isEnabledFor(logging.DEBUG):
            error = record.get("error") or {}
            log.debug("line %d: call %s (%s) %s: %s: %s", lineno, record.get("id"), record.get("name"),
                      record.get("status"), error.get("type", "error output"), str(error.get("message", ""))[:200])


__all__ = ["MAX_OWED_RECORDS", "Job"]
