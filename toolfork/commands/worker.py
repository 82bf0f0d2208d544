"""``toolfork worker``: serve tool calls as a co-process, answering each call as soon as it finishes.

A client (another program, in any language) writes JSONL calls on our stdin and reads JSONL results on
our stdout. Unlike ``toolfork run - -o -`` (input order), results come back in completion order, so
a quick call is never held behind a slow one sent before it: the client matches them by id. The line
formats are ``run``'s (same call shapes in, same record out).

Every call starts as soon as it is read and a worker is free, also while others run: the input yields
``WAIT`` when the client is quiet, and ``Executor.imap_unordered`` keeps the calls in flight going
and writes each result as it comes. At most ``--window`` calls are in flight; further lines wait (a
bounded read-ahead, then the pipe). Ids need only be unique among the calls in flight, so a
long-lived client may reuse them. A bad line gets its error record at once; the worker never stops on
bad input and exits 0 at the end of stdin.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from typing import Any

from toolfork.commands._governance import add_governance_arguments, govern
from toolfork.commands._input import LineSource, read_call
from toolfork.commands._loading import BadLine, UsageError
from toolfork.commands._logs import chosen_level, routed_logs
from toolfork.commands._metrics import MetricsEndpoint, add_metrics_arguments
from toolfork.commands._options import (
    EXIT_OK,
    MIN_DEFAULT_WINDOW,
    add_common_arguments,
    build_executor,
    default_window,
    error,
    interrupted_once,
    positive_int,
    resolve_tools,
)
from toolfork.commands._otel import configure as configure_otel
from toolfork.commands._output import OutFile, record_of
from toolfork.executor import WAIT
from toolfork.executor.tracing.providers import flush as flush_telemetry

log = logging.getLogger("toolfork.worker")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    add_governance_arguments(parser)
    parser.add_argument("--window", type=positive_int, default=None, metavar="N",
                        help=f"most calls in flight (default 4 x workers, at least {MIN_DEFAULT_WINDOW})")
    add_metrics_arguments(parser)


def serve(executor: Any, source: LineSource, out: OutFile, window: int) -> None:
    """Until the end of input: start each call as it is read, write each result as it finishes."""
    running: set[str] = set()  # ids in flight: at most ``window`` of them

    def calls() -> Iterator[Any]:
        for item in source.items():
            if not isinstance(item, tuple):  # WAIT: the client is quiet
                yield WAIT
                continue
            lineno, raw = item
            call = read_call(raw, lineno)
            if not isinstance(call, BadLine) and call.id in running:
                message = f"line {lineno}: duplicate id {call.id!r}: a call with this id is still running"
                call = BadLine(call.id, call.name, message)
            if isinstance(call, BadLine):
                out.write(call.record())
                continue
            running.add(call.id)
            yield call

    for result in executor.imap_unordered(calls(), window=window, wakeup_fd=source.wakeup_fd):
        running.discard(result.call_id)
        if result.encoded is not None:  # an ok result its worker already wrote as a line
            out.write_line(result.encoded)
        else:
            out.write(record_of(result))


def main(args: argparse.Namespace) -> int:
    # Before the pool forks: its workers inherit where log lines go (whole lines on stderr).
    with routed_logs(chosen_level(args), _log_line):
        return _main(args)


def _log_line(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _main(args: argparse.Namespace) -> int:
    try:
        endpoint = MetricsEndpoint.from_args(args)
        if endpoint is not None:
            endpoint.prepare()  # the MeterProvider, before the Executor makes its instruments
        configure_otel("worker", metrics_taken=endpoint is not None)  # before the tools load and the pool forks
        tools, origin = resolve_tools(args, None)
        tools, governance = govern(args, tools)
        out = OutFile.open("-", append=True)  # before the pool forks: see OutFile
        executor = build_executor(args, tools, **governance)
    except UsageError as exc:
        return error("worker", str(exc))
    if endpoint is not None:
        try:
            endpoint.start("worker")  # after the pool forked: no worker holds its socket
        except UsageError as exc:
            executor.close()
            endpoint.close()
            return error("worker", str(exc))
    print(f"toolfork worker: {len(executor.tools)} tools from {origin}; {executor.mode} mode, "
          f"{executor.workers} workers; reading calls on stdin", file=sys.stderr, flush=True)
    pids = getattr(executor.backend, "worker_pids", None)
    log.info("pool started: %s mode, %d workers%s", executor.mode, executor.workers,
             f" (pids {', '.join(map(str, pids))})" if pids else "")
    source = LineSource(sys.stdin.buffer)  # after the executor: its pool must not inherit the wake-up pipe
    with interrupted_once() as stop:
        try:
            serve(executor, source, out, args.window or default_window(executor.workers))
        except KeyboardInterrupt:
            return stop.exit_code
        except BrokenPipeError:
            pass  # the client went away: nothing left to answer
        except OSError as exc:  # stdin could not be read
            return error("worker", str(exc))
        finally:
            executor.close()
            source.close()
            flush_telemetry()  # the last calls' spans, after the close ended the open ones
            if endpoint is not None:
                endpoint.close()
    return EXIT_OK


__all__ = ["add_arguments", "main", "serve"]
