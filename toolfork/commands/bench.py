"""`toolfork bench`: time your own calls, or the suite's workloads, on every executor side by side.

    --tools T --calls C ──read_user_work (as `toolfork run` reads them)──┐
    --only / --quick ──workloads──────────────────────────────────────────┴─▶ run_benchmark (rounds)
        ──▶ summary on stdout (100 columns) + latest.md, latest.json, plots in the output directory

Executors that are not installed are left out and named on one line (``pip install toolfork[bench]``
brings pebble, loky, mpire and matplotlib; Ray comes with ``toolfork[ray]``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfork._extras import missing_extra_message
from toolfork.bench.config import WORKLOADS
from toolfork.commands._options import positive_int

if TYPE_CHECKING:
    from toolfork.bench.user_calls import UserWork


def _csv(value: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="SPEC",
        help="your tools, as for `toolfork run` (path/to/tools.py, MODULE or MODULE:ATTR; repeatable); "
        "without it, the tools.py next to --calls",
    )
    parser.add_argument(
        "--calls",
        metavar="CALLS.jsonl",
        help="time these calls (one per line, the shapes `toolfork run` reads) as one batch on every executor",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the headline workloads at small sizes, without Ray (45 s of CPU: under a minute on a quiet "
        "2-core machine)",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        metavar="N",
        help="interleaved rounds; each figure is their median, shown with its spread (default 3)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="pool size for your calls (default: the number of cores)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where latest.md, latest.json and the plots go (default: a new ./toolfork-bench/<time>, or "
        "~/.cache/toolfork/bench/<time> when the current directory is in a git or hg checkout)",
    )
    parser.add_argument(
        "--only", type=_csv, metavar="WORKLOAD,...", help=f"workloads to run, from: {', '.join(WORKLOADS)}"
    )
    parser.add_argument(
        "--executors",
        type=_csv,
        metavar="NAME,...",
        help="executors to compare (registered names, or module:Class for your own Peer)",
    )
    parser.add_argument(
        "--isolation",
        choices=("cell", "executor"),
        help="one runner process per executor x workload x round (default for the full run) "
        "or one per executor for the whole run (default with --quick and --calls)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--list", action="store_true", help="list executors and workloads, then exit")


def main(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from toolfork.bench import BenchConfig, run_benchmark, write_report
    from toolfork.bench.outdir import default_out_dir
    from toolfork.bench.peers import PEERS
    from toolfork.bench.summary import summary
    from toolfork.commands._loading import UsageError

    if args.list:
        for name, cls in PEERS.items():
            print(f"{name:22} {cls.description}  [{cls.unavailable() or 'available'}]")
        print("workloads: " + ", ".join(WORKLOADS))
        return 0
    if args.tools and not args.calls:
        print("toolfork bench: --tools needs --calls CALLS.jsonl: the calls to time", file=sys.stderr)
        return 2
    user: UserWork | None = None
    if args.calls:
        try:
            user = read_user_work(args.tools, args.calls)
        except UsageError as exc:
            print(f"toolfork bench: {exc}", file=sys.stderr)
            return 2
    config = BenchConfig.quick() if args.quick else BenchConfig.full()
    if args.rounds:
        config = replace(config, rounds=args.rounds)
    if args.workers:
        config = replace(config, user_workers=args.workers)
    isolation = args.isolation or ("executor" if args.quick or user else "cell")

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        results = run_benchmark(config, args.executors, args.only, isolation=isolation, progress=progress, user=user)
    except (ValueError, ImportError) as exc:
        print(f"toolfork bench: {missing_extra_message(exc) or exc}", file=sys.stderr)
        return 2
    out = args.out or str(default_out_dir())
    paths = write_report(results, out, plots=not args.no_plots)
    if results.get("plots_skipped"):
        print(f"toolfork bench: no plots: {results['plots_skipped']}", file=sys.stderr)
    print(summary(results, paths), end="")
    return 0


def _absolute(spec: str) -> str:
    """A path spec made absolute, so a worker started elsewhere finds the same file."""
    from toolfork.tools.specs import is_path, split_spec

    module, attr = split_spec(spec)
    if not is_path(module):
        return spec
    path = str(Path(module).expanduser().resolve())
    return f"{path}:{attr}" if attr else path


def read_user_work(tool_specs: list[str], calls_path: str) -> UserWork:
    """Load the tools (``UsageError`` naming what is wrong) and parse the calls file like ``toolfork run``."""
    from toolfork.bench.honour import FRESH, LIMITS, TIMEOUT
    from toolfork.bench.user_calls import UserWork
    from toolfork.commands._input import open_input, read_call
    from toolfork.commands._loading import BadLine, UsageError, default_tools_file, load_all_tools
    from toolfork.tools.registry import collect_tools

    specs = list(tool_specs)
    if not specs:
        found = default_tools_file(calls_path)
        if found is None:
            raise UsageError("no tools: pass --tools MODULE:ATTR or path/to/tools.py (or put a tools.py "
                             "next to the calls file)")
        specs = [str(found)]
    tools = collect_tools(load_all_tools(specs, []))  # errors name the specs as the user typed them
    specs = [_absolute(s) for s in specs]
    if calls_path == "-":
        raise UsageError("--calls needs a file: every round runs the same calls")
    calls: list[dict[str, Any]] = []
    skipped: list[str] = []
    asks: set[str] = set()
    with open_input(calls_path) as stream:
        for lineno, raw in enumerate(stream, 1):
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            call = read_call(line, lineno)
            if isinstance(call, BadLine):
                skipped.append(call.message)
            elif call.name not in tools:
                skipped.append(f"line {lineno}: unknown tool {call.name!r} (tools: {', '.join(sorted(tools))})")
            else:
                tool = tools[call.name]
                timeout = call.timeout if call.timeout is not None else tool.timeout
                calls.append({"tool": call.name, "arguments": call.arguments, "timeout": timeout})
                asks |= {ask for ask, on in ((TIMEOUT, timeout is not None), (LIMITS, tool.limits is not None),
                                             (FRESH, tool.fresh_process)) if on}
    if not calls:
        why = f"; {skipped[0]}" if skipped else ""
        raise UsageError(f"{calls_path!r}: no usable call lines{why}")
    return UserWork(specs, calls, skipped, ", ".join(specs), sorted(asks))
