"""``toolfork run`` on the fork pool's line lane: the host moves raw lines and finished output bytes,
the workers parse, validate, run and encode (see ``toolfork.executor.backends.lines``).

Data flow (one thread; ``Lane.step`` is where it waits)::

    LineSource ── (lineno, line) | WAIT ──> _take: the plain shape by a strict pattern ─┐
                                            anything else: read_call here (_read_here) ─┤
                                                                                         ▼
        owed: every line owed to the output, in input order (a Line; settled ones have .out)
                 │ lines to run                                              ▲ .out set
                 ▼                                                           │
             Lane.ready ──>     workers ──> .out = output line | ToolResult ─┘
                                        ──> "m": not the call the pattern said ──> _read_here
    _emit: the settled lines at the front of owed ──> OutFile (runs of ok lines in one write)

The output is the general path's (``Job`` in run.py), line for line: the same records, order,
duplicate and ``--resume`` rules and messages. What makes that hold with ids taken from a pattern:

* A line goes the fast way only when it opens exactly like ``{"id": "…", "name": "…", "arguments":
  {`` (no escapes in the id or name), names a tool of the job, and holds no ``"timeout"`` (a line's
  own timeout must be known here, for its deadline). Its worker parses it and runs it only if it is
  that call; otherwise ("m") it comes back and is read here like any other line.
* Until its worker has checked it, such a line's id is *pending*: a later line with the same id waits
  (reading stops) until the check is in, and is then judged against the true id; so does a later
  line with the id ``line-N`` while line N is unchecked (a line N that is not valid JSON has that
  id). A line sent back is judged in input order, and only once no unchecked line could still turn
  out to hold its id. Checked ids join ``seen`` when their records are written. So an id never runs
  twice, and a duplicate is refused as on the general path (the tests compare the two on random
  mixes of every shape and fault). The one case where the verdict can differ takes
  duplicate JSON keys (``{"id": "x", …, "id": "y"}``, read as y): if a later line with id y has
  started by the time the worker finds that out, the earlier line is the one refused.
* The journal (``--resume`` without guessing, see ``toolfork.executor.journal``): the ids of a chunk
  of lines are written to it in one write (``Lane.before_send``) right before the chunk goes to a
  worker, so only lines that were sent count as started. A line whose id started in an earlier run
  goes the slow way, where it gets an OutcomeUnknown record unless its tool is idempotent or
  ``--rerun-unknown`` was given.
* Each call written is counted in ``Executor.stats()`` as the general path counts it (by tool and
  status). With OpenTelemetry on (``observed``), ``toolfork run`` takes the general path: every call
  gets its span and its measures there.
* ``--window`` bounds every line owed to the output (running, waiting to run, or settled behind an
  earlier one), so memory stays bounded as on the general path.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from toolfork.commands._idset import IdSet
from toolfork.commands._input import LineSource, read_call
from toolfork.commands._job import Job
from toolfork.commands._loading import BadLine
from toolfork.commands._output import OutFile, record_of
from toolfork.commands._progress import Progress
from toolfork.commands._resume import ResumePoint
from toolfork.executor import WAIT, metering, tracing
from toolfork.executor.backends.lines import Lane, Line, fits
from toolfork.executor.calls import CallBook, effective_timeout, stamp
from toolfork.executor.journal import Journal
from toolfork.executor.types import ToolResult

# The plain line shape as ``json.dumps`` writes it, id and name without escapes or control characters.
_PLAIN = re.compile(rb'\{"id": ?"([^"\\\x00-\x1f]*)", ?"name": ?"([^"\\\x00-\x1f]+)", ?"arguments": ?\{')
_SKIP = object()  # the out of an owed line that --resume skips after all (it was in OUT)


def observed() -> bool:
    """Whether OpenTelemetry traces or meters this process's calls (nothing imported when it does not).
    The lane makes no span and records no metric per line: a job so observed takes the general path,
    where every call gets its ``execute_tool`` span, its tool's spans and its measures."""
    return tracing.capture() is not None or metering.recorder() is not None


class LaneJob(Job):
    """What ``Job`` does, on the line lane; see the module docstring. ``owed_lines`` takes the place of
    ``Job.owed``: every line owed to the output, in input order."""

    def __init__(self, executor: Any, source: LineSource, out: OutFile, progress: Progress,
                 done: IdSet | ResumePoint, window: int, journal: Journal | None = None) -> None:
        super().__init__(executor, source, out, progress, done, window, journal)
        self.owed_lines: deque[Line] = deque()
        self.pending: dict[str, Line] = {}  # id -> the line holding it until its worker checks it
        self.lane: Lane = executor.backend.open_lane(read_call, executor.dispatch_context(journal))
        if journal is not None:
            self.lane.before_send = lambda chunk: journal.start([line.call_id for line in chunk])
        tools = executor.tools
        self.tools = tools
        default = executor.timeout
        # A plain line sets no timeout of its own (see _take): its tool's, else the executor's.
        self.timeouts = {name: effective_timeout(None, tool.timeout, default) for name, tool in tools.items()}
        # Admission and finishing of the lines read here, and the counts of every line written (the
        # counts dict is the job's own in ``Executor.stats()``, see ``run``).
        self.book = CallBook(default, {}, {}, lambda: tools, journal=journal, journal_on_send=True)

    def in_flight(self) -> int:
        return sum(1 for line in self.owed_lines if line.out is None)

    @staticmethod
    def fits(executor: Any) -> bool:
        return bool(executor.capabilities.lines) and fits(executor.tools.values(), executor.governance)

    def run(self) -> None:
        lane, owed, out, window = self.lane, self.owed_lines, self.out, self.window
        items = self.source.items()
        wakeup_fd = self.source.wakeup_fd
        refill = max(1, window // 4)
        pushback: Any = None  # a line that waits for the check of an earlier line with its id
        eof = False
        # This thread keeps the lane's deadlines: it never waits for the reader of our output. While
        # the writer holds its most lines, settled lines stay owed (at most --window of them) and the
        # lane is stepped with a short wait, so a hang is still killed at its deadline.
        out.wait_for_room = False
        with self.executor.counted() as counts, lane:
            self.book.counts = counts
            while True:
                if out.error is not None:  # the output is gone (a closed pipe, a full disk): stop
                    raise out.error
                stalled = out.full()
                waiting = False
                while len(owed) < window:
                    if pushback is not None:
                        item, pushback = pushback, None
                    else:
                        item = next(items, None) if not eof else None
                    if item is None:
                        eof = True
                        break
                    if item is WAIT:
                        waiting = True
                        break
                    if not self._take(item):
                        pushback = item
                        break
                if lane.mismatched:
                    self._reread()
                if owed and owed[0].out is not None and not stalled:
                    self._emit()
                if eof and not owed:
                    break
                # Read on only once a quarter of the window is free: refilling it line by line would
                # wake the host for every line that finishes.
                can_read = not eof and not waiting and pushback is None and len(owed) <= window - refill
                if can_read and not lane.ready:
                    continue
                lane.step(wait=stalled or (not can_read and (lane.busy or waiting)),
                          wakeup_fd=wakeup_fd if waiting else None,
                          poll=stalled or (waiting and wakeup_fd is None))
        out.flush()  # a write error (a full disk, a closed pipe) is raised here, inside the job

    # ------------------------------------------------------------------ reading lines

    def _take(self, item: tuple[int, Any]) -> bool:
        """Take one input line; False when it must wait (an earlier line with its id is unchecked)."""
        lineno, raw = item
        if type(raw) is bytes and not self.resume.in_prefix:  # lines of OUT's prefix are matched here
            m = _PLAIN.match(raw)
            if m is not None and b'"timeout"' not in raw:
                try:
                    call_id, name = m[1].decode(), m[2].decode()
                except UnicodeDecodeError:
                    return self._read_here(lineno, raw, None)
                timeouts = self.timeouts
                if name in timeouts:
                    other = self.pending.get(call_id)
                    if other is not None:
                        if other.raw is not None:
                            return False
                    elif call_id.startswith("line-") and self._unchecked_line(call_id):
                        return False
                    elif call_id not in self.seen and not self.resume.holds(call_id) and \
                            not (self.journal is not None and self.journal.started(call_id)):
                        line = Line(lineno, call_id, name, raw, None, timeouts[name])
                        self.pending[call_id] = line
                        self.owed_lines.append(line)
                        self.lane.ready.append(line)
                        return True
        return self._read_here(lineno, raw, None)

    def _unchecked_line(self, call_id: str) -> bool:
        """Whether ``line-N`` may still become the id of line N: a line the pattern took for another id
        that its worker has not checked yet (a line that is not valid JSON gets the id ``line-N``)."""
        number = call_id[5:]
        if not number.isdigit():
            return False
        lineno = int(number)
        return any(p.lineno == lineno and p.raw is not None
                   for p in (*self.pending.values(), *self.lane.mismatched))  # mismatched: not judged yet

    def _holder(self, call_id: str, line: Line | None) -> str | None:
        """Which line already has ``call_id`` (an earlier one, or, after duplicate JSON keys, possibly a
        later one: see the module docstring), or None when it is free."""
        other = self.pending.get(call_id)
        if other is not None and other is not line:
            return "an earlier line" if line is None or other.lineno < line.lineno else "another line"
        return "an earlier line" if call_id in self.seen else None

    def _read_here(self, lineno: int, raw: Any, line: Line | None, requeue: list[Line] | None = None) -> bool:
        """Read a line in the host, as the general path does: a new line (``line`` None), or a lane
        line its worker sent back (a call to run goes to ``requeue``). False when it must wait: its id
        may yet turn out to be an unchecked line's."""
        call = read_call(raw, lineno)
        cid = call.id
        other = self.pending.get(cid)
        if (other is not None and other is not line and other.raw is not None) or \
                (cid.startswith("line-") and self._unchecked_line(cid)):
            return False
        if self.resume.written(cid) if line is None else self.resume.holds(cid):
            self.seen.add(cid)  # as the run that wrote its record did
            return self._settle(line, _SKIP, lineno)
        holder = self._holder(cid, line)
        if isinstance(call, BadLine):
            if holder is not None:
                call.message += f"; its id {cid!r} is also used by {holder}"
            else:
                self.seen.add(cid)
            return self._settle(line, call.record(), lineno)
        if holder is not None:
            bad = BadLine(cid, call.name, f"line {lineno}: duplicate id {cid!r}: {holder} has the same id")
            return self._settle(line, bad.record(), lineno)
        self.seen.add(cid)
        d = self.book.admit(call, self.tools.get(call.name))
        if isinstance(d, ToolResult):
            return self._settle(line, d, lineno)
        timeout = d.timeout
        if line is None:
            line = Line(lineno, cid, call.name, None, call.arguments, timeout, meta=call.meta)
            self.owed_lines.append(line)
            self.lane.ready.append(line)
        else:
            line.call_id, line.name, line.arguments, line.timeout = cid, call.name, call.arguments, timeout
            line.meta = call.meta
            line.raw = None
            assert requeue is not None
            requeue.append(line)
        return True

    def _settle(self, line: Line | None, out: Any, lineno: int) -> bool:
        """A line whose outcome is known without running it: written now if nothing is owed before it."""
        if type(out) is ToolResult:  # a result made here (an unknown tool): made now
            stamp(out)
        if line is not None:
            line.raw = None
            line.out = out
        elif out is _SKIP:
            self.progress.skip(lineno)
        elif not self.owed_lines:
            self._write(out, lineno, ran=False)
        else:
            settled = Line(lineno, "", "", None, None, None)
            settled.out = out
            self.owed_lines.append(settled)
        return True

    def _reread(self) -> None:
        """Lines whose worker found them to be other than the pattern said: read here, in input order,
        each judged once no earlier unchecked line could still turn out to hold its id (until then it
        waits in ``mismatched``). The ones to run go before the lines read after them."""
        lines = sorted(self.lane.mismatched, key=lambda ln: ln.lineno)
        self.lane.mismatched = []
        for line in lines:  # their pattern ids were wrong: nobody waits for those any more
            if self.pending.get(line.call_id) is line:
                del self.pending[line.call_id]
        requeue: list[Line] = []
        for line in lines:
            if not self._read_here(line.lineno, line.raw, line, requeue):
                self.lane.mismatched.append(line)
        self.lane.ready.extendleft(reversed(requeue))

    # ------------------------------------------------------------------ writing records

    def _emit(self) -> None:
        owed, pending, seen, out, progress = self.owed_lines, self.pending, self.seen, self.out, self.progress
        run: list[bytes] = []
        last = 0
        finish_line = self.book.finish_line
        while owed and owed[0].out is not None:
            line = owed.popleft()
            if pending.get(line.call_id) is line:
                del pending[line.call_id]
                seen.add(line.call_id)
            result = line.out
            if type(result) is bytes:
                run.append(result)
                last = line.lineno
                finish_line(line.name)
                continue
            if run:
                out.write_line(b"".join(run), len(run))
                progress.note_ok(len(run), last)
                run = []
            if result is _SKIP:
                progress.skip(line.lineno)
            elif type(result) is dict:
                self._write(result, line.lineno, ran=False)
            else:
                self._write(result, line.lineno, ran=True)
        if run:
            out.write_line(b"".join(run), len(run))
            progress.note_ok(len(run), last)

    def _write(self, record: Any, lineno: int, *, ran: bool) -> None:
        if not isinstance(record, dict):  # a ToolResult: the call's end, then its record
            self.book.finish(record)
            record, ran = record_of(record), True
        super()._write(record, lineno, ran=ran)


__all__ = ["LaneJob", "observed"]
