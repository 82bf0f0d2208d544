"""The payloads workload (``toolfork bench --only payloads``): large results crossing the process
boundary, in three shapes a job returns, at 1, 10 and 100 MB, for every executor.

* ``str``: one large text (a parsed document);
* ``file``: bytes in a ``ToolOutput.file`` (an image or a PDF: base64 text in a content block);
* ``rows``: a list of small dicts (a table), about 100 bytes of pickle per row.

Every peer runs the same function and gets the same object back (the thread pool is the floor: no
copy at all). Not in the default run: 100 MB results take a while for the slowest peers.
"""

from __future__ import annotations

import statistics
from typing import Any

from toolfork.bench.base import Task
from toolfork.bench.batch import Context, MetricSpec, WorkloadError, require_ok, run_batch
from toolfork.bench.config import BenchConfig, size_label
from toolfork.bench.payload_calls import PAYLOAD_KINDS, is_whole_payload


def w_payloads(ctx: Context) -> dict[str, Any]:
    c = ctx.config
    out: dict[str, Any] = {}
    with ctx.pool(2) as peer:
        for kind in PAYLOAD_KINDS:
            for size, reps in zip(c.payloads_sizes, c.payloads_reps, strict=True):
                times = []
                for _ in range(reps):
                    outcomes, dt = run_batch(peer, [Task(f"payload_{kind}", {"nbytes": size})])
                    require_ok(f"payloads {kind} {size_label(size)}", outcomes)
                    if not is_whole_payload(kind, outcomes[0].value, size):
                        raise WorkloadError(f"payloads {kind} {size_label(size)}: the result that came back is "
                                            "not the whole payload")
                    outcomes.clear()
                    times.append(dt)
                out[f"payloads_{kind}_{size_label(size)}_ms"] = statistics.median(times) * 1e3
    return out


def metric_specs(config: BenchConfig) -> list[MetricSpec]:
    labels = {"str": "str", "file": "bytes in a ToolOutput.file", "rows": "list of dicts"}
    return [
        MetricSpec(f"payloads_{kind}_{size_label(size)}_ms", "payloads",
                   f"payloads: one {size_label(size)} result, {labels[kind]}", "ms")
        for kind in PAYLOAD_KINDS
        for size in config.payloads_sizes
    ]


__all__ = ["metric_specs", "w_payloads"]
