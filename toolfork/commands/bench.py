"""`toolfork bench`: run the benchmark suite and write the table, JSON and plots.

Peers that are not installed show as "n/a" (``pip install toolfork[bench]`` brings pebble, loky
and matplotlib; Ray comes with ``toolfork[ray]``).
"""

from __future__ import annotations

import argparse
import os
import sys

from toolfork._extras import missing_extra_message
from toolfork.bench.config import WORKLOADS

DEFAULT_OUT = os.path.join("bench", "results")


def _csv(value: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer repetitions and smaller sweeps (under two minutes on 2 cores)",
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"where latest.md, latest.json and the plots go (default: {DEFAULT_OUT})",
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
        help="one runner process per executor x workload (default for the full run) "
        "or per executor (default with --quick)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--list", action="store_true", help="list executors and workloads, then exit")


def main(args: argparse.Namespace) -> int:
    from toolfork.bench import BenchConfig, run_benchmark, write_report
    from toolfork.bench.peers import PEERS

    if args.list:
        for name, cls in PEERS.items():
            print(f"{name:22} {cls.description}  [{cls.unavailable() or 'available'}]")
        print("workloads: " + ", ".join(WORKLOADS))
        return 0
    config = BenchConfig.quick() if args.quick else BenchConfig.full()
    isolation = args.isolation or ("executor" if args.quick else "cell")

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        results = run_benchmark(config, args.executors, args.only, isolation=isolation, progress=progress)
    except (ValueError, ImportError) as exc:
        print(f"toolfork bench: {missing_extra_message(exc) or exc}", file=sys.stderr)
        return 2
    paths = write_report(results, args.out, plots=not args.no_plots)
    if results.get("plots_skipped"):
        print(f"toolfork bench: no plots: {results['plots_skipped']}", file=sys.stderr)
    with open(paths["markdown"]) as fh:
        print(fh.read())
    print("wrote " + ", ".join(paths.values()), file=sys.stderr)
    return 0
