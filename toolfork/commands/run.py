"""``toolfork run CALLS.jsonl``: a batch job, one result line per input line, in input order.

Data flow::

    LineSource (for a pipe: a reader thread and a wake-up pipe, see _input)
        │ (lineno, line) | WAIT
        ▼
    read_call ─── bad line, duplicate id ──> its record, held behind the calls before it ──┐
        │ ToolCall | WAIT                                                                 │
        ▼                                                                                 ▼
    Executor.imap ── ToolResult, call order ──> Job: every line's record in input order ──> OutFile
                                                                              (one write a line)

Memory stays bounded whatever the input size: ``imap`` keeps at most ``--window`` calls in flight,
at most ``MAX_HELD_RECORDS`` bad-line records wait behind them, the pipe reader's queue is bounded, and
the only thing that grows with the input is the set of ids seen (16 bytes an id, see ``IdSet``).

Driven as a co-process (``toolfork run - -o -``), a line that arrives while calls run starts at once:
the input yields ``WAIT`` while the other side is quiet, the calls in flight go on, and their results
are written (in input order) as soon as they and the ones before them are done.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import deque
from collections.abc import Iterator
from typing import Any

from toolfork.commands._idset import IdSet
from toolfork.commands._input import LineSource, count_lines, open_input, read_call
from toolfork.commands._loading import BadLine, UsageError
from toolfork.commands._options import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    MIN_DEFAULT_WINDOW,
    add_common_arguments,
    add_mcp_arguments,
    build_executor,
    default_window,
    error,
    positive_float,
    positive_int,
    resolve_tools,
)
from toolfork.commands._output import OutFile, record_of, result_failed, scan_previous
from toolfork.commands._progress import Progress
from toolfork.executor import WAIT

# Bad-line records held back behind running calls before the feeder waits for those calls: without a
# bound, a million bad lines behind one slow call would all sit in memory.
MAX_HELD_RECORDS = 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("calls", metavar="CALLS.jsonl",
                        help="one tool call per line ('-' = stdin): plain, OpenAI tool_calls or Anthropic "
                             "tool_use shape. Without --tools/--toolkit, the tools.py next to it is loaded")
    parser.add_argument("-o", "--output", metavar="OUT.jsonl", default="-",
                        help="where result lines go ('-' = stdout, the default)")
    add_common_arguments(parser)
    add_mcp_arguments(parser)
    parser.add_argument("--resume", action="store_true",
                        help="skip ids already in OUT (complete lines) and append the rest")
    parser.add_argument("--window", type=positive_int, default=None, metavar="N",
                        help="calls in flight or buffered at most (default 4 x workers, at least "
                             f"{MIN_DEFAULT_WINDOW}); lower it when single results are very large")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--progress-interval", type=positive_float, default=2.0, metavar="S",
                        help="seconds between plain progress lines when stderr is not a terminal (2)")


class Job:
    """Feeds the executor from the input and writes every line's record in input order.

    ``held`` lists what is owed to the output in input order: ``None`` for a call whose result the
    executor has not returned yet, or a ready record (a bad line) that must wait behind those calls.
    """

    max_held_records = MAX_HELD_RECORDS

    def __init__(self, executor: Any, source: LineSource, out: OutFile, progress: Progress,
                 done: IdSet, window: int) -> None:
        self.executor = executor
        self.source = source
        self.out = out
        self.progress = progress
        self.done = done
        self.seen = IdSet()
        self.window = window
        self.held: deque[tuple[int, dict[str, Any] | None]] = deque()
        self.held_records = 0

    def run(self) -> None:
        results = self.executor.imap(self._calls(), window=self.window, wakeup_fd=self.source.wakeup_fd)
        for result in results:
            lineno, placeholder = self.held.popleft()
            assert placeholder is None, "results and calls out of step"
            if result.encoded is not None:  # an ok result its worker already wrote as a line
                self.out.write_line(result.encoded)
                self.progress.note(failed=False, lineno=lineno, ran=True)
            else:
                self._write(record_of(result), lineno, ran=True)
            if self.held:
                self._emit_held()
        assert not self.held, "a call got no result"
        self.out.flush()  # a write error (a full disk, a closed pipe) is raised here, inside the job

    def _calls(self) -> Iterator[Any]:
        """ToolCalls for the executor, in input order, or WAIT. Bad lines never reach it: their records
        are written here, or held until the calls before them are written."""
        lines = self.source.items()
        out = self.out
        while True:
            if out.error is not None:  # the output is gone (a closed pipe, a full disk): stop reading
                raise out.error
            if self.held_records >= self.max_held_records:
                yield WAIT  # the calls in flight finish first; their results let the held records out
                continue
            item = next(lines, None)
            if item is None:
                return
            if not isinstance(item, tuple):  # WAIT: the other side is quiet
                yield WAIT
                continue
            lineno, raw = item
            call = read_call(raw, lineno)
            if isinstance(call, BadLine):
                if call.id in self.done:
                    self.progress.skip(lineno)
                    continue
                if not self.seen.add(call.id):
                    call.message += f"; its id {call.id!r} is also used by an earlier line"
                self._hold_or_write(call.record(), lineno)
                continue
            if call.id in self.done:
                self.seen.add(call.id)
                self.progress.skip(lineno)
                continue
            if not self.seen.add(call.id):
                bad = BadLine(call.id, call.name,
                              f"line {lineno}: duplicate id {call.id!r}: an earlier line has the same id")
                self._hold_or_write(bad.record(), lineno)
                continue
            self.held.append((lineno, None))
            yield call

    def _hold_or_write(self, record: dict[str, Any], lineno: int) -> None:
        if self.held:
            self.held.append((lineno, record))
            self.held_records += 1
        else:
            self._write(record, lineno, ran=False)

    def _emit_held(self) -> None:
        while self.held and self.held[0][1] is not None:
            lineno, record = self.held.popleft()
            self.held_records -= 1
            assert record is not None
            self._write(record, lineno, ran=False)

    def _write(self, record: dict[str, Any], lineno: int, *, ran: bool) -> None:
        record = self.out.write(record)  # a result that cannot be written comes back as an error record
        self.progress.note(failed=result_failed(record), lineno=lineno, ran=ran)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def main(args: argparse.Namespace) -> int:
    if args.resume and args.output == "-":
        return error("run", "--resume needs -o OUT.jsonl: the ids already done are read from that file")
    if args.calls != "-" and args.output != "-" and _same_file(args.calls, args.output):
        return error("run", f"-o {args.output!r} is the input file; it would be overwritten")
    try:
        tools, origin = resolve_tools(args, args.calls)
        stream = open_input(args.calls)
    except UsageError as exc:
        return error("run", str(exc))
    executor = out = None
    try:
        done, previous, previous_failed = scan_previous(args.output) if args.resume else (IdSet(), 0, 0)
        out = OutFile.open(args.output, append=args.resume, background=True)  # before the pool forks
        executor = build_executor(args, tools)
    except UsageError as exc:
        if executor is not None:
            executor.close()
        if out is not None:
            out.close()
        if stream is not sys.stdin.buffer:
            stream.close()
        return error("run", str(exc))
    total = count_lines(args.calls) if args.calls != "-" else None
    progress = Progress(None if args.quiet else sys.stderr, total, args.progress_interval)
    reason = f" ({executor.fallback_reason})" if executor.fallback_reason else ""
    resuming = f"; resuming after {previous} done" if args.resume else ""
    progress.message(f"toolfork run: {len(executor.tools)} tools from {origin}; "
                     f"{executor.mode} mode{reason}, {executor.workers} workers{resuming}")
    source = LineSource(stream)  # after the executor: its pool must not inherit the wake-up pipe
    out.on_error = source.wake  # a write that fails while the input is quiet must not go unnoticed
    from toolfork.commands._lane_job import LaneJob  # it builds on Job

    window = args.window or default_window(executor.workers)
    lane = LaneJob.fits(executor) and os.environ.get("TOOLFORK_LINE_LANE", "1") != "0"
    job = (LaneJob if lane else Job)(executor, source, out, progress, done, window)
    code = EXIT_OK
    try:
        job.run()
    except KeyboardInterrupt:
        progress.finish("interrupted; rerun with --resume to continue")
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = EXIT_FAILED  # the reader of our output went away: nothing left to do
    except OSError as exc:
        progress.finish()
        code = error("run", str(exc))
    else:
        progress.finish()
        code = EXIT_FAILED if progress.failed or previous_failed else EXIT_OK
    finally:
        executor.close()
        out.close()
        source.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    return code


__all__ = ["MAX_HELD_RECORDS", "Job", "add_arguments", "main"]
