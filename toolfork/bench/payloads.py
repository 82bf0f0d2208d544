"""The payloads workload (``toolfork bench --only payloads``): large results crossing the process
boundary, in three shapes a batch job returns, at 1, 10 and 100 MB, for every executor.

* ``str``: one large text (a parsed document);
* ``file``: bytes in a ``ToolOutput.file`` (an image or a PDF: base64 text in a content block);
* ``rows``: a list of small dicts (a table), about 100 bytes of pickle per row.

Every peer runs the same function and gets the same object back (the thread pool is the floor: no
copy at all). Not in the default run: 100 MB results take a while for the slowest peers.
"""

from __future__ import annotations

import statistics
from typing import Any

from toolfork.bench.config import size_label

PAYLOAD_KINDS: tuple[str, ...] = ("str", "file", "rows")
ROW_BYTES = 100  # about what one row pickles to


def payload_str(nbytes: int) -> str:
    """Return a text of ``nbytes`` characters.

    Args:
        nbytes: length of the text
    """
    return "x" * nbytes


def payload_file(nbytes: int) -> Any:
    """Return ``nbytes`` of binary data as a file block.

    Args:
        nbytes: size of the file
    """
    from toolfork.tools.output import ToolOutput

    return ToolOutput.file(b"\x89" * nbytes, media_type="application/octet-stream", name="blob.bin")


def payload_rows(nbytes: int) -> list[dict[str, Any]]:
    """Return about ``nbytes`` of table rows (dicts).

    Args:
        nbytes: approximate size of the table
    """
    return [{"id": i, "name": f"row {i}", "score": i * 0.5, "ok": True} for i in range(max(1, nbytes // ROW_BYTES))]


FUNCTIONS = {fn.__name__: fn for fn in (payload_str, payload_file, payload_rows)}


def _size_of(kind: str, value: Any, nbytes: int) -> bool:
    """Whether the value that came back is the whole payload (a wrong answer must not look fast)."""
    if kind == "str":
        return isinstance(value, str) and len(value) == nbytes
    if kind == "rows":
        return isinstance(value, list) and len(value) == max(1, nbytes // ROW_BYTES)
    block = value.content[0] if hasattr(value, "content") else None
    return block is not None and block.type == "file" and len(block.data) == 4 * ((nbytes + 2) // 3)


def w_payloads(ctx: Any) -> dict[str, Any]:
    from toolfork.bench.peers import Task
    from toolfork.bench.workloads import WorkloadError, require_ok, run_batch

    c = ctx.config
    out: dict[str, Any] = {}
    with ctx.pool(2) as peer:
        for kind in PAYLOAD_KINDS:
            for size, reps in zip(c.payloads_sizes, c.payloads_reps, strict=True):
                times = []
                for _ in range(reps):
                    outcomes, dt = run_batch(peer, [Task(f"payload_{kind}", {"nbytes": size})])
                    require_ok(f"payloads {kind} {size_label(size)}", outcomes)
                    if not _size_of(kind, outcomes[0].value, size):
                        raise WorkloadError(f"payloads {kind} {size_label(size)}: the result that came back is "
                                            "not the whole payload")
                    outcomes.clear()
                    times.append(dt)
                out[f"payloads_{kind}_{size_label(size)}_ms"] = statistics.median(times) * 1e3
    return out


def metric_specs(config: Any) -> list[Any]:
    from toolfork.bench.workloads import MetricSpec

    labels = {"str": "str", "file": "bytes in a ToolOutput.file", "rows": "list of dicts"}
    return [
        MetricSpec(f"payloads_{kind}_{size_label(size)}_ms", "payloads",
                   f"payloads: one {size_label(size)} result, {labels[kind]}", "ms")
        for kind in PAYLOAD_KINDS
        for size in config.payloads_sizes
    ]


__all__ = ["FUNCTIONS", "PAYLOAD_KINDS", "metric_specs", "payload_file", "payload_rows", "payload_str", "w_payloads"]
