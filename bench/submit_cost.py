r"""What a trivial call costs the host: one at a time through ``submit()`` against a ``run()`` batch, and a
small batch against the same batch on an earlier tree, in one run.

Three numbers, each the median of ``--rounds`` alternating rounds on warm pools of ``--workers`` workers,
in wall-clock time and in the host process's CPU time (all its threads: what is ours on the host side,
and steadier than the wall clock on a shared machine):

* ``run`` : per call, one ``run()`` batch of ``--calls`` trivial calls;
* ``submit``: per call, ``--calls`` trivial calls submitted one by one (``Executor.submit``), then
  every future waited for;
* ``batch4``: per batch, ``run()`` of 4 trivial calls (and the same on the earlier tree, when given).

The submit/run ratio is the first figure of merit; batch4 against the earlier tree's is the second.
The earlier tree is a ``toolfork_before`` package made as ``before_peer.py``'s docstring says::

    PYTHONPATH=. python bench/submit_cost.py                       # this tree alone
    PYTHONPATH=.:/tmp/before python bench/submit_cost.py --before  # and the earlier tree, alternating

``--profile FILE`` writes a cProfile of the submit rounds (host side) instead of timing them.
"""
from __future__ import annotations

import argparse
import importlib
import statistics
import time
from typing import Any


def _pool(package: str, workers: int) -> tuple[Any, Any]:
    executor = importlib.import_module(f"{package}.executor")
    tools = importlib.import_module(f"{package}.tools")
    from toolfork.bench.calls import trivial_call

    ex = executor.Executor([tools.tool(name="trivial")(trivial_call)], mode="fork", workers=workers)
    return ex, executor.ToolCall


Timing = tuple[float, float]  # seconds of wall-clock time, seconds of the host process's CPU time


def _timed(work: Any) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def run_per_call(ex: Any, call: Any, n: int) -> Timing:
    calls = [call(f"c{i}", "trivial", {"x": i}) for i in range(n)]
    results: list[Any] = []
    wall, cpu = _timed(lambda: results.extend(ex.run(calls)))
    assert len(results) == n and all(r.status == "ok" for r in results)
    return wall / n, cpu / n


def submit_per_call(ex: Any, call: Any, n: int) -> Timing:
    calls = [call(f"s{i}", "trivial", {"x": i}) for i in range(n)]
    results: list[Any] = []
    wall, cpu = _timed(lambda: results.extend(f.result() for f in [ex.submit(c) for c in calls]))
    assert len(results) == n and all(r.status == "ok" for r in results)
    return wall / n, cpu / n


def batch_of_4(ex: Any, call: Any, repeats: int = 20) -> Timing:
    calls = [call(f"b{i}", "trivial", {"x": i}) for i in range(4)]

    def batches() -> None:
        for _ in range(repeats):
            ex.run(calls)

    wall, cpu = _timed(batches)
    return wall / repeats, cpu / repeats


def _median(timings: list[Timing], which: int) -> float:
    return statistics.median(t[which] for t in timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--before", action="store_true", help="also time the toolfork_before package")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the submit rounds into FILE")
    args = parser.parse_args()

    # Batches of 4 get pools of their own: a pool that served submit() keeps its submit batch live,
    # and an earlier tree's pool never had one.
    ex, call = _pool("toolfork", args.workers)
    small = _pool("toolfork", args.workers)[0]
    old = _pool("toolfork_before", args.workers) if args.before else None
    try:
        for _ in range(2):  # warm: every worker has run calls, the submit thread is up
            run_per_call(ex, call, args.calls)
            submit_per_call(ex, call, args.calls)
            batch_of_4(small, call, 20)
            if old is not None:
                batch_of_4(*old, 20)
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.rounds):
                submit_per_call(ex, call, args.calls)
            profiler.disable()
            profiler.dump_stats(args.profile)
            print(f"profile of {args.rounds} submit rounds written to {args.profile}")
            return
        runs: list[Timing] = []
        submits: list[Timing] = []
        fours: list[Timing] = []
        old_fours: list[Timing] = []
        for _ in range(args.rounds):
            runs.append(run_per_call(ex, call, args.calls))
            submits.append(submit_per_call(ex, call, args.calls))
            for _ in range(10):  # small blocks, alternating: the machine's load changes between rounds
                fours.append(batch_of_4(small, call))
                if old is not None:
                    old_fours.append(batch_of_4(*old))
    finally:
        ex.close()
        small.close()
        if old is not None:
            old[0].close()
    for label, which in (("wall-clock", 0), ("host CPU", 1)):
        run_us, submit_us = _median(runs, which) * 1e6, _median(submits, which) * 1e6
        four_ms = _median(fours, which) * 1e3
        print(f"{label}:")
        print(f"  run    per call: {run_us:8.1f} us   ({args.calls} calls, {args.workers} workers)")
        print(f"  submit per call: {submit_us:8.1f} us   ratio submit/run {submit_us / run_us:.2f}x")
        print(f"  batch of 4     : {four_ms:8.3f} ms")
        if old_fours:
            old_ms = _median(old_fours, which) * 1e3
            print(f"  batch of 4 before: {old_ms:6.3f} ms   ratio now/before {four_ms / old_ms:.2f}x")

if __name__ == "__main__":
    main()
