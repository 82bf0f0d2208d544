"""How long opening a session takes: plain, and sandboxed (its process enters the sandbox at open).

Each row opens N sessions one at a time on one warm Executor (the first open of each kind is not
counted: it forks the spares), runs one trivial call in each, and closes it; reported in ms per open
(median and p95) and per first call. "back to back": each open right after the last close (a
sandboxed spare may still be entering); "warm spare": 0.2 s between them (not counted); "opened ahead":
the same, each next session asked for with ``Executor.session_ahead`` first. Run as root for the cgroup rows:

    PYTHONPATH=. python bench/session_open.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from typing import Any

from toolfork import Limits, ToolRuntime, tool
from toolfork.executor import Executor, ToolCall


@tool
def bump(runtime: ToolRuntime) -> int:
    """Add one to the session's counter."""
    runtime.state["n"] = runtime.state.get("n", 0) + 1
    return int(runtime.state["n"])


def row(ex: Executor, n: int, pause: float, ahead: bool = False, **options: Any) -> tuple[float, float, float]:
    opens, calls = [], []
    for i in range(n + 1):
        if ahead:  # the next session, opened ahead whole (factory run, sandbox locked) while we wait
            ex.session_ahead(dict, **options)
        time.sleep(pause)  # the spare made at the last open has time to get ready (0: back to back)
        t0 = time.perf_counter()
        s = ex.session(dict, **options)
        t1 = time.perf_counter()
        s.run([ToolCall("c", "bump", {})])
        t2 = time.perf_counter()
        s.close()
        if i:
            opens.append(t1 - t0)
            calls.append(t2 - t1)
    opens.sort()
    return 1e3 * statistics.median(opens), 1e3 * opens[int(0.95 * (len(opens) - 1))], 1e3 * statistics.median(calls)


@tool
def spin(runtime: ToolRuntime) -> int:
    """Change the state, then spin until killed."""
    runtime.state["n"] = -1
    while True:
        pass


def rollback(ex: Executor, n: int, **options: Any) -> float:
    """ms past a 0.2 s timeout until a spinning call's result is in and its checkpoint took over."""
    late = []
    options.setdefault("checkpoint", True)
    with ex.session(dict, **options) as s:
        s.run([ToolCall("c", "bump", {})])
        for _ in range(n):
            t0 = time.perf_counter()
            r = s.run([ToolCall("t", "spin", {}, timeout=0.2)])[0]
            late.append(time.perf_counter() - t0 - 0.2)
            assert r.status == "timeout", r
    return 1e3 * statistics.median(late)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    ws = tempfile.mkdtemp()
    rows = {
        "plain": {},
        "plain, checkpoint": {"checkpoint": True},
        "sandboxed (network=False)": {"limits": Limits(network=False)},
        "sandboxed + write_paths": {"limits": Limits(network=False, write_paths=[ws])},
        "sandboxed + write_paths + cgroup, checkpoint": {
            "limits": Limits(network=False, write_paths=[ws], memory_mb=256, cpu_s=5, processes=8), "checkpoint": True},
    }
    with Executor([bump, spin], mode="fork", workers=1, timeout=60, kill_grace=0.2) as ex:
        print(f"{'row':62} {'open ms (median)':>17} {'open ms (p95)':>14} {'first call ms':>14}")
        for pause, how in ((0.0, "back to back"), (0.2, "warm spare"), (0.2, "opened ahead")):
            for name, options in rows.items():
                if how == "opened ahead":
                    options = {**options, "ahead": True}
                label = f"{name}, {how}"
                try:
                    median, p95, call = row(ex, n, pause, **options)
                except Exception as exc:  # a row this machine cannot give (no cgroup as this user)
                    print(f"{label:62} refused: {type(exc).__name__}: {str(exc)[:80]}")
                    continue
                print(f"{label:62} {median:17.2f} {p95:14.2f} {call:14.2f}")
        print("rollback after a timed-out call (kill_grace=0.2), ms past the timeout, median:")
        sandboxed = Limits(network=False, write_paths=[ws])
        for name, options in (("plain", {}), ("sandboxed + write_paths", {"limits": sandboxed}),
                              ("sandboxed + write_paths, checkpoint='after_result'",
                               {"limits": sandboxed, "checkpoint": "after_result"})):
            print(f"  {name:60} {rollback(ex, max(3, n // 3), **options):.2f}")


if __name__ == "__main__":
    main()
