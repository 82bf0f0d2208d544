"""What every workload is built from: a warm pool per workload (``Context.pool``), one timed batch
(``run_batch``), the rule that a figure is only kept when its calls came back "ok" (``require_ok``),
and the description of a figure for the report (``MetricSpec``).

Apart from ``workloads.py`` so that workloads kept in modules of their own (payloads) use the same
plumbing without importing the module that lists them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolfork.bench import procs
from toolfork.bench.base import Outcome, Peer, Task
from toolfork.bench.config import BenchConfig


class WorkloadError(RuntimeError):
    """The executor gave wrong or missing results where the workload needs them all."""


@dataclass
class Context:
    peer_cls: type[Peer]
    config: BenchConfig
    leftovers: list[int] = field(default_factory=list)  # per pool closed: processes left behind
    user_calls: list[dict[str, Any]] = field(default_factory=list)  # the "user" workload's call lines

    @contextlib.contextmanager
    def pool(self, workers: int, after_close: Callable[[], None] | None = None) -> Iterator[Peer]:
        """A started, warmed pool; on exit it is closed, ``after_close`` looks at what is left (before
        anything is cleaned up), then what it left behind is counted and killed so that it cannot
        disturb the next measurement."""
        baseline = procs.descendant_pids()
        peer = self.peer_cls(workers)
        peer.start()
        try:
            warm_up(peer, workers)
            yield peer
        finally:
            peer.close()
            if after_close is not None:
                after_close()
            if not self.peer_cls.shared_processes:
                left = procs.leftovers(baseline)
                self.leftovers.append(len(left))
                procs.kill_all(left)


def run_batch(peer: Peer, tasks: Sequence[Task]) -> tuple[list[Outcome], float]:
    """Outcomes and wall time of one batch; an executor that raises fails every call of the batch."""
    t0 = time.perf_counter()
    try:
        outcomes = peer.run(tasks)
    except Exception as exc:
        outcomes = [Outcome("error", error=f"{type(exc).__name__}: {exc}"[:500]) for _ in tasks]
    return outcomes, time.perf_counter() - t0


def require_ok(what: str, outcomes: Sequence[Outcome]) -> None:
    bad = [o for o in outcomes if o.status != "ok"]
    if bad:
        first = bad[0]
        raise WorkloadError(f"{what}: {len(bad)}/{len(outcomes)} calls not ok (first: {first.status}: {first.error})")


def warm_up(peer: Peer, workers: int) -> None:
    """Make every worker exist and have run a call (spawn-style pools start lazily)."""
    for _ in range(2):
        outcomes, _ = run_batch(peer, [Task("sleep_call", {"seconds": 0.02}) for _ in range(workers)])
        require_ok("warm-up", outcomes)
    outcomes, _ = run_batch(peer, [Task("trivial_call", {"x": i}) for i in range(2 * workers)])
    require_ok("warm-up", outcomes)


def timed_reps(peer: Peer, make: Callable[[], list[Task]], reps: int, what: str) -> list[float]:
    times = []
    for _ in range(reps):
        outcomes, dt = run_batch(peer, make())
        require_ok(what, outcomes)
        times.append(dt)
    return times


@dataclass(frozen=True)
class MetricSpec:
    key: str
    workload: str
    label: str
    unit: str  # s, ms, us, MB, calls/s, count, yes/no, status
    better: str | None = "lower"  # lower | higher | None (not comparable as a ratio)
    ideal: float | None = None
    target: float | None = None
    target_text: str | None = None


__all__ = ["Context", "MetricSpec", "WorkloadError", "require_ok", "run_batch", "timed_reps", "warm_up"]
