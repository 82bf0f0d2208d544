"""The benchmark suite: toolfork against the executors a user would pick instead, side by side.

``run_benchmark(config, executors, workloads)`` runs every executor x workload in interleaved rounds,
each in a runner subprocess with a time limit, and returns JSON-ready results;
``write_report(results, out_dir)`` writes latest.md, latest.json and the plots; ``summary(results)``
is the terminal view. ``toolfork bench`` and ``bench/run.py`` are the command-line front ends.

The names below are imported on first use: a spawn-style worker (loky, Ray) that only needs
``toolfork.bench.calls`` must not pay for the harness, the report and psutil.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolfork.bench.config import WORKLOADS, BenchConfig
    from toolfork.bench.harness import ISOLATIONS, run_benchmark
    from toolfork.bench.peers import PEERS, Outcome, Peer, Task, default_executors
    from toolfork.bench.report import markdown, write_report
    from toolfork.bench.summary import summary

_WHERE = {
    "ISOLATIONS": "harness",
    "run_benchmark": "harness",
    "PEERS": "peers",
    "Outcome": "peers",
    "Peer": "peers",
    "Task": "peers",
    "default_executors": "peers",
    "WORKLOADS": "config",
    "BenchConfig": "config",
    "markdown": "report",
    "write_report": "report",
    "summary": "summary",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'toolfork.bench' has no attribute {name!r}")
    return getattr(importlib.import_module(f"toolfork.bench.{_WHERE[name]}"), name)


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
    "summary",
    "write_report",
]
