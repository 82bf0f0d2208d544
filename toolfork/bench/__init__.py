"""The benchmark suite: toolfork against the executors a user would pick instead, side by side.

``run_benchmark(config, executors, workloads)`` runs every executor x workload in a subprocess with a
time limit and returns JSON-ready results; ``write_report(results, out_dir)`` writes latest.md,
latest.json and the plots. ``toolfork bench`` and ``bench/run.py`` are the command-line front ends.
"""

from toolfork.bench.config import WORKLOADS, BenchConfig
from toolfork.bench.harness import ISOLATIONS, run_benchmark
from toolfork.bench.peers import PEERS, Outcome, Peer, Task, default_executors
from toolfork.bench.report import markdown, write_report

__all__ = [
    "ISOLATIONS",
    "PEERS",
    "WORKLOADS",
    "BenchConfig",
    "Outcome",
    "Peer",
    "Task",
    "default_executors",
    "markdown",
    "run_benchmark",
    "write_report",
]
