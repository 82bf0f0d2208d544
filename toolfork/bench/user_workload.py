"""The "user" workload: the calls of your own calls file, as one batch, on a pool of ``user_workers``.

Every call line becomes ``Task("user_call", {"tool", "arguments"}, timeout)`` (see ``user_calls``); the
figures are the batch's wall time, the time per call, and how many calls came back "ok", so that an
executor that is fast because it failed shows as such.
"""

from __future__ import annotations

from typing import Any

from toolfork.bench.base import Task
from toolfork.bench.batch import Context, MetricSpec, WorkloadError, run_batch
from toolfork.bench.config import BenchConfig


def w_user(ctx: Context) -> dict[str, Any]:
    calls = ctx.user_calls
    if not calls:
        raise WorkloadError("the user workload needs calls: toolfork bench --tools T --calls CALLS.jsonl")
    tasks = [Task("user_call", {"tool": c["tool"], "arguments": c["arguments"]}, c.get("timeout")) for c in calls]
    with ctx.pool(ctx.config.user_workers) as peer:
        outcomes, wall = run_batch(peer, tasks)
    bad = [o for o in outcomes if o.status != "ok"]
    return {
        "user_wall_s": wall,
        "user_ms_per_call": wall / len(tasks) * 1e3,
        "user_ok": len(outcomes) - len(bad),
        "user_first_not_ok": f"{bad[0].status}: {bad[0].error}"[:300] if bad else None,
    }


def metric_specs(config: BenchConfig, calls: int | None = None) -> list[MetricSpec]:
    n = "your" if calls is None else f"your {calls}"
    return [
        MetricSpec("user_wall_s", "user", f"{n} calls, one batch: wall", "s"),
        MetricSpec("user_ms_per_call", "user", f"{n} calls: wall per call", "ms"),
        MetricSpec("user_ok", "user", f"{n} calls: results ok", "count", better="higher", ideal=calls),
    ]
