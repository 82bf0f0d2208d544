"""``toolfork worker``: serve tool calls as a co-process, answering each call as soon as it finishes.

A client (another program, in any language) writes JSONL calls on our stdin and reads JSONL results on
our stdout. Unlike ``toolfork run - -o -`` (input order), results come back in completion order, so
a quick call is never held behind a slow one sent before it: the client matches them by id. The line
formats are ``run``'s (same call shapes in, same record out).

The calls waiting on stdin when the pool is free form one batch (at most ``--window``); a call that
arrives while a batch runs starts when that batch is done. Ids need only be unique among the calls of
a batch, so a long-lived client may reuse ids. A bad line gets its error record at once; the worker
never stops on bad input and exits 0 at the end of stdin.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from toolfork.commands._loading import BadLine, UsageError, parse_call
from toolfork.commands.run import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    LineSource,
    OutFile,
    add_common_arguments,
    build_executor,
    default_window,
    error,
    positive_int,
    resolve_tools,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--window", type=positive_int, default=None, metavar="N",
                        help="most calls in one batch (default 4 x workers, at least 256)")


def serve(executor: Any, source: LineSource, out: OutFile, window: int) -> None:
    """Until the end of input: take the lines that are waiting (at least one, at most ``window``),
    run them as one batch, write each result as it finishes."""
    from toolfork.executor import CallFinished

    while True:
        batch: list[Any] = []
        ids: set[str] = set()
        while len(batch) < window and (not batch or source.ready()):
            item = source.next()
            if item is None:
                break
            lineno, raw = item
            if not raw.strip():
                continue
            call = parse_call(raw, lineno)
            if not isinstance(call, BadLine) and call.id in ids:
                call = BadLine(call.id, call.name,
                               f"line {lineno}: duplicate id {call.id!r}: a call with this id is still running")
            if isinstance(call, BadLine):
                out.write(call.record())
                continue
            ids.add(call.id)
            batch.append(call)
        if not batch:  # the inner loop only gives up with nothing when the input has ended
            return
        for event in executor.stream(batch):
            if type(event) is CallFinished:
                out.write(event.result.to_dict())


def main(args: argparse.Namespace) -> int:
    try:
        tools, origin = resolve_tools(args, None)
        executor = build_executor(args, tools)
    except UsageError as exc:
        return error("worker", str(exc))
    print(f"toolfork worker: {len(executor.tools)} tools from {origin}; {executor.mode} mode, "
          f"{executor.workers} workers; reading calls on stdin", file=sys.stderr, flush=True)
    out = OutFile.open("-", append=True)
    try:
        serve(executor, LineSource(sys.stdin.buffer), out, args.window or default_window(executor.workers))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        pass  # the client went away: nothing left to answer
    finally:
        executor.close()
    return EXIT_OK


__all__ = ["add_arguments", "main", "serve"]
