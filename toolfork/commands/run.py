"""``toolfork run CALLS.jsonl``: a job, one result line per input line, in input order.

The job itself is ``Job`` (``_job``: through ``Executor.imap``) or ``LaneJob`` (``_lane_job``: the fork
pool's line lane, when every tool fits it); this module reads the options and runs one of them.

Memory stays bounded whatever the input size: ``imap`` keeps at most ``--window`` calls in flight,
at most ``MAX_OWED_RECORDS`` bad-line records wait behind them, the pipe reader's queue is bounded, and
the only thing that grows with the input is the set of ids seen (16 bytes an id, see ``IdSet``).

Driven as a co-process (``toolfork run - -o -``), a line that arrives while calls run starts at once:
the input yields ``WAIT`` while the other side is quiet, the calls in flight go on, and their results
are written (in input order) as soon as they and the ones before them are done.

With ``-o OUT.jsonl`` the job keeps a journal beside it, ``OUT.jsonl.journal`` (see
``toolfork.executor.journal``): each call's start, written before the call reaches a worker. On
``--resume`` a call that started and has no record in OUT gets an ``OutcomeUnknown`` record instead of
running again (unless its tool is idempotent, or ``--rerun-unknown``, which also re-runs the
``OutcomeUnknown`` records of OUT in place: ``_rerun``); ``--durable`` syncs each start entry to the
disk before the call starts.

Before anything changes, the run locks OUT, then the journal (``oslock``: one writer per job), and a
resume checks the journal is there, is this job's, and was started on the same input, tools and
options (``_fingerprint``); each refusal is exit 2. The first Ctrl-C or SIGTERM is a warm stop
(``_stopping``): no more lines, the calls taken finish; the second stops at once.

What the user sees on stderr: the progress (``_progress``), log lines above it (``_logs``: ``-v``,
``--log-level``), and at the end the records counted by status and error type (``_summary``: this
run's, and after ``--resume`` all of OUT's; after Ctrl-C or SIGTERM, what was written).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from toolfork.commands._fingerprint import differences, fingerprint, input_digest
from toolfork.commands._governance import add_governance_arguments, govern
from toolfork.commands._idset import IdSet
from toolfork.commands._input import LineSource, count_lines, open_input
from toolfork.commands._job import MAX_OWED_RECORDS, Job
from toolfork.commands._lane_job import LaneJob, observed
from toolfork.commands._loading import UsageError, load_hook
from toolfork.commands._logs import chosen_level, routed_logs
from toolfork.commands._options import (
    EXIT_FAILED,
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
from toolfork.commands._otel import configure as configure_otel
from toolfork.commands._output import OutFile, scan_previous
from toolfork.commands._progress import Progress
from toolfork.commands._rerun import begin_rerun, settle_rerun
from toolfork.commands._resume import ResumePoint
from toolfork.commands._session_job import SessionJob, last_lines
from toolfork.commands._status import show_status
from toolfork.commands._stopping import warm_stop
from toolfork.commands._summary import Tally
from toolfork.executor.journal import Journal, JournalBusy, JournalError
from toolfork.executor.tracing.providers import flush as flush_telemetry

JOURNAL_SUFFIX = ".journal"

log = logging.getLogger("toolfork.run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("calls", metavar="CALLS.jsonl", nargs="?",
                        help="one tool call per line ('-' = stdin): plain, OpenAI tool_calls or Anthropic "
                             "tool_use shape. Without --tools/--toolkit, the tools.py next to it is loaded")
    parser.add_argument("-o", "--output", metavar="OUT.jsonl", default="-",
                        help="where result lines go ('-' = stdout, the default)")
    add_common_arguments(parser)
    add_mcp_arguments(parser)
    add_governance_arguments(parser)
    parser.add_argument("--resume", action="store_true",
                        help="skip ids already in OUT (complete lines) and append the rest; a call that "
                             "started but has no line in OUT gets an OutcomeUnknown error record and is not "
                             "run again (see --rerun-unknown)")
    parser.add_argument("--rerun-unknown", action="store_true",
                        help="with --resume: run again the calls that started but have no line in OUT (their "
                             "effect may then happen twice); idempotent=True tools are run again anyway")
    parser.add_argument("--accept-changes", action="store_true",
                        help="with --resume: go on although the input, the tools or the options that change results "
                             "differ from those the job started with (else that is refused, saying what differs)")
    parser.add_argument("--missing-journal-ok", action="store_true",
                        help="with --resume: go on although OUT.journal is missing (a call that was running when the "
                             "job stopped then runs again)")
    parser.add_argument("--status", metavar="OUT.jsonl", default=None,
                        help="print what OUT holds, its records by status and the OutcomeUnknown ids, and whether a "
                             "job writes it now; runs nothing (CALLS.jsonl is not needed)")
    parser.add_argument("--durable", action="store_true",
                        help="sync each call's start entry in OUT.journal to the disk before the call starts, "
                             "so --resume is exact after a power loss too (costs a disk sync per dispatch)")
    parser.add_argument("--session-factory", metavar="MODULE:FUNCTION", default=None,
                        help='lines with a "session" key run as sessions, one per key, in input order: the '
                             "state of each is built by this function, called with the key's first "
                             '"session_args" (an object: keyword arguments; an array: positional ones)')
    parser.add_argument("--session-checkpoint", action="store_true",
                        help="with --session-factory: a call that crashes or times out in a session leaves the "
                             "state as it was before it, and the session goes on (else its later lines fail)")
    parser.add_argument("--replay-sessions", action="store_true",
                        help="with --resume: a session that had calls done runs them again on a fresh state "
                             "before its next line (else its later lines get SessionNotResumed records)")
    parser.add_argument("--window", type=positive_int, default=None, metavar="N",
                        help="calls in flight or buffered at most (default 4 x workers, at least "
                             f"{MIN_DEFAULT_WINDOW}); lower it when single results are very large")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--progress-interval", type=positive_float, default=2.0, metavar="S",
                        help="seconds between plain progress lines when stderr is not a terminal (2)")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def session_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """``SessionJob``'s keywords from the options (None without --session-factory); a factory that
    cannot be loaded is a usage error, before any call runs."""
    if args.session_factory is None:
        return None
    factory = load_hook(args.session_factory, "--session-factory")
    try:
        last = last_lines(args.calls) if args.calls != "-" else None
    except OSError as exc:
        raise UsageError(f"cannot read {args.calls!r}: {exc.strerror}") from exc
    return {"factory": factory, "factory_spec": args.session_factory, "last": last,
            "replay": args.replay_sessions, "checkpoint": args.session_checkpoint}


def open_journal(args: argparse.Namespace) -> Journal | None:
    """The journal beside OUT, locked for this run (none when the output is stdout: such a job cannot be
    resumed). A new job starts a new journal; ``--resume`` goes on with the one there (see
    ``check_journal_there``). Opened after OUT, whose lock already keeps a second writer out."""
    if args.output == "-":
        return None
    path = args.output + JOURNAL_SUFFIX
    try:
        return Journal(path, durable=args.durable, rerun_unknown=args.rerun_unknown, keep_results=False,
                       match="id", new=not args.resume)
    except JournalBusy as busy:
        who = f"process {busy.pid}" if busy.pid is not None else "another process"
        raise UsageError(f"{args.output!r} is being written by {who} (its journal {path!r} is locked): a job has one "
                         "writer at a time; wait for it to end, or stop it") from None
    except JournalError as exc:
        raise UsageError(str(exc)) from exc


def check_journal_there(args: argparse.Namespace) -> None:
    """``--resume`` of an OUT whose journal is missing is refused (before OUT is opened, which creates
    it), unless ``--missing-journal-ok``."""
    path = args.output + JOURNAL_SUFFIX
    if args.output != "-" and args.resume and not args.missing_journal_ok and os.path.lexists(args.output) and \
            not os.path.lexists(path):
        raise UsageError(
            f"--resume: {args.output!r} has no journal beside it ({path!r} is missing: moved, or OUT copied without "
            "it); without it, the calls that were running when the job stopped cannot be told from those that "
            "never started. Put the journal back beside OUT, or pass --missing-journal-ok to go on without it (a "
            "call that was running then runs again)")


def _ran_check(journal: Journal | None) -> Callable[[str], bool] | None:
    """What ``scan_previous`` asks of each record in OUT of a call that ran: did it start in this journal?
    A journal this resume started (``--missing-journal-ok``) adopts those records instead: it writes
    their starts, so a later resume finds them."""
    if journal is None:
        return None
    if not journal.fresh:
        return journal.started

    def adopt(call_id: str) -> bool:
        journal.start([call_id])
        return True

    return adopt


def check_fingerprint(args: argparse.Namespace, journal: Journal, tool_names: list[str],
                      digest: dict[str, Any] | None) -> None:
    """A new job records what it runs on; ``--resume`` refuses to go on with something else (a usage
    error saying what differs), unless ``--accept-changes``, which records the new fingerprint."""
    now = fingerprint(args, tool_names, digest)
    if not args.resume or journal.fresh:
        journal.restate(now)
        return
    changed = differences(journal.about, now)
    if not changed:
        return
    if not args.accept_changes:
        raise UsageError(f"--resume: the job {args.output!r} was started on something else; what differs: "
                         + "; ".join(changed) + ". Resume with what the job started with, start it anew (without "
                         "--resume), or pass --accept-changes to go on regardless")
    journal.restate(now)


def main(args: argparse.Namespace) -> int:
    if args.status is not None:
        return show_status(args.status, args.status + JOURNAL_SUFFIX)
    if args.calls is None:
        return error("run", "CALLS.jsonl is missing: name the file of calls ('-' for stdin)")
    if args.resume and args.output == "-":
        return error("run", "--resume needs -o OUT.jsonl: the ids already done are read from that file")
    for flag in ("accept_changes", "missing_journal_ok"):
        if getattr(args, flag) and not args.resume:
            return error("run", f"--{flag.replace('_', '-')} is for --resume")
    if args.rerun_unknown and not args.resume:
        return error("run", "--rerun-unknown is for --resume: it says what to do with calls an earlier run left "
                            "unfinished")
    if args.durable and args.output == "-":
        return error("run", "--durable needs -o OUT.jsonl: the journal it syncs is kept beside OUT")
    if (args.session_checkpoint or args.replay_sessions) and args.session_factory is None:
        return error("run", "--session-checkpoint and --replay-sessions are for --session-factory")
    if args.replay_sessions and not args.resume:
        return error("run", "--replay-sessions is for --resume: it says what to do with sessions an earlier run "
                            "left half done")
    if args.calls != "-" and args.output != "-" and _same_file(args.calls, args.output):
        return error("run", f"-o {args.output!r} is the input file; it would be overwritten")
    # A job with a journal hashes its input (one read, which counts the lines too); else only counted.
    digest = input_digest(args.calls) if args.output != "-" else None
    total = digest["lines"] if digest is not None else count_lines(args.calls) if args.calls != "-" else None
    progress = Progress(None if args.quiet else sys.stderr, total, args.progress_interval)
    # Before the tools load and the pool forks: their log lines too go above the bar (workers inherit it).
    with routed_logs(chosen_level(args), progress.log):
        return _main(args, progress, digest)


def _main(args: argparse.Namespace, progress: Progress, digest: dict[str, Any] | None) -> int:
    configure_otel("run")  # before the tools load and the pool forks, as opentelemetry-instrument would
    try:
        tools, origin = resolve_tools(args, args.calls)
        tools, governance = govern(args, tools)
        sessions = session_options(args)  # before the pool forks: its module is in every worker
        stream = open_input(args.calls)
    except UsageError as exc:
        return error("run", str(exc))
    executor = out = journal = None
    try:
        check_journal_there(args)
        # OUT's lock, then the journal's, make this run the job's one writer; nothing changes before both.
        out = OutFile.open(args.output, append=args.resume, background=True, keep=True)  # before the pool forks
        journal = open_journal(args)
        if not args.resume:
            out.empty()
        if journal is not None and args.resume:
            settle_rerun(args.output, journal)  # an earlier --rerun-unknown killed before it put records in place
        done, previous, previous_failed, before = (
            scan_previous(args.output, _ran_check(journal), journal.path if journal is not None else "",
                          rerun=args.rerun_unknown and journal is not None)
            if args.resume else (IdSet(), 0, 0, Tally()))
        if journal is not None and isinstance(done, ResumePoint) and done.rerun:
            begin_rerun(args.output, journal)
        started = time.monotonic()
        executor = build_executor(args, tools, **governance)
        if journal is not None:
            check_fingerprint(args, journal, list(executor.tools), digest)
            executor.job_key = journal.job_key  # session and single calls' idempotency keys: the job's
    except UsageError as exc:
        if executor is not None:
            executor.close()
        if out is not None:
            out.close()
        if journal is not None:
            journal.close()
        if stream is not sys.stdin.buffer:
            stream.close()
        return error("run", str(exc))
    reason = f" ({executor.fallback_reason})" if executor.fallback_reason else ""
    resuming = f"; resuming after {previous} done" if args.resume else ""
    progress.message(f"toolfork run: {len(executor.tools)} tools from {origin}; "
                     f"{executor.mode} mode{reason}, {executor.workers} workers{resuming}")
    pids = getattr(executor.backend, "worker_pids", None)
    log.info("pool started in %.2f s: %s mode%s, %d workers%s", time.monotonic() - started, executor.mode, reason,
             executor.workers, f" (pids {', '.join(map(str, pids))})" if pids else "")
    source = LineSource(stream)  # after the executor: its pool must not inherit the wake-up pipe
    out.on_error = source.wake  # a write that fails while the input is quiet must not go unnoticed
    window = args.window or default_window(executor.workers)
    lane = sessions is None and LaneJob.fits(executor) and _lane_wanted(os.environ.get("TOOLFORK_LINE_LANE", ""))
    log.debug("input %s (%s lines), output %s%s, journal %s; window %d, %s", args.calls,
              "?" if progress.total is None else progress.total, args.output, " (appended)" if args.resume else "",
              journal.path if journal is not None else "none", window,
              "the line lane (workers parse the lines)" if lane else "Executor.imap")
    job: Job
    if sessions is not None:
        job = SessionJob(executor, source, out, progress, done, window, journal, **sessions)
    else:
        job = (LaneJob if lane else Job)(executor, source, out, progress, done, window, journal)
    progress.begin()
    code = EXIT_OK
    note = ""
    with warm_stop(source.stop, job.in_flight) as stop:
        try:
            job.run()
        except KeyboardInterrupt:
            note = "interrupted; rerun with --resume to continue"
            progress.finish(note)
            code = stop.exit_code
        except BrokenPipeError:
            code = EXIT_FAILED  # the reader of our output went away: nothing left to do
        except OSError as exc:
            progress.finish()
            code = error("run", str(exc))
        else:
            if stop.warm:  # the first signal: the calls taken finished and their records are written
                note = "stopped after the running calls finished; rerun with --resume to continue"
                progress.finish(note)
                code = stop.exit_code
            else:
                progress.finish()
                code = EXIT_FAILED if progress.failed or previous_failed else EXIT_OK
        finally:
            executor.close()
            out.close()
            if journal is not None:
                try:
                    settle_rerun(args.output, journal)  # the records of calls run again, in their places
                except UsageError as exc:
                    code = error("run", str(exc))
                finally:
                    journal.close()
            source.close()
            if stream is not sys.stdin.buffer:
                stream.close()
            flush_telemetry()  # the last calls' spans, after the close ended the open ones
    summarize(progress, before if args.resume else None, args.output, interrupted=bool(note))
    log.info("job done in %.2f s: %d records written, exit status %d", time.monotonic() - started,
             progress.tally.records, code)
    return code


def _lane_wanted(setting: str) -> bool:
    """``TOOLFORK_LINE_LANE``: "0" never takes the lane, "1" whenever the tools fit it; unset, unless
    OpenTelemetry traces or meters the calls (the lane makes no spans: ``_lane_job.observed``)."""
    return setting != "0" and (setting == "1" or not observed())


def summarize(progress: Progress, before: Tally | None, output: str, *, interrupted: bool) -> None:
    """The counts the run ends with (see ``_summary``): this run's records; after ``--resume``, the
    whole output file's too."""
    tally = progress.tally
    if before is None and not interrupted:
        progress.message(f"toolfork run: {tally.records} records: {tally.describe()}")
        return
    what = "written before the interruption" if interrupted else "written by this run"
    progress.message(f"toolfork run: {tally.records} records {what}: {tally.describe()}")
    if before is not None:
        whole = before.merged(tally)
        progress.message(f"toolfork run: {whole.records} records in all of {output}: {whole.describe()}")


__all__ = ["MAX_OWED_RECORDS", "Job", "add_arguments", "main"]
