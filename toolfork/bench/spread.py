"""One cell's rounds turned into one figure per metric with its spread, and the rule for "wide".

    rounds: [{"status": "ok", "metrics": {"tiny_us_per_call": 31.0, ...}}, {...}, {...}]
        ──combine──▶ {"status": "ok", "metrics": {"tiny_us_per_call": 29.4},      (the median)
                      "spread": {"tiny_us_per_call": [26.2, 29.4, 66.6]},        (min, median, max)
                      "wide": ["tiny_us_per_call"], "rounds": 3}

The median is what the table shows (like pyperf, the centre of repeated runs rather than one run);
min and max are shown beside it, so a reader sees how far apart the rounds were. A metric is "wide"
when (max - min) is more than ``wide_spread`` of its median: that figure moved more between rounds
than most differences worth acting on. Statistics come from the standard library's ``statistics``.
"""

from __future__ import annotations

import math
import statistics
from typing import Any


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def is_wide(low: float, mid: float, high: float, wide_spread: float) -> bool:
    """Whether the rounds of one figure lie further apart than ``wide_spread`` of their median."""
    if mid == 0:
        return high != low
    return (high - low) / abs(mid) > wide_spread


def combine(rounds: list[dict[str, Any]], wide_spread: float) -> dict[str, Any]:
    """The cell of a run from the cells of its rounds. A round that failed makes the cell fail (its
    status and detail, and how many rounds that was): a flaky executor must not look like a fast one."""
    if not rounds:
        return {"status": "not run", "metrics": {}}
    failed = [c for c in rounds if c.get("status") != "ok"]
    if failed:
        cell = dict(failed[0])
        cell["rounds"] = len(rounds)
        cell["rounds_failed"] = len(failed)
        return cell
    metrics: dict[str, Any] = {}
    spread: dict[str, list[float]] = {}
    wide: list[str] = []
    for key, first in rounds[0].get("metrics", {}).items():
        values = [_number(c.get("metrics", {}).get(key)) for c in rounds]
        if _number(first) is None or any(v is None for v in values):
            metrics[key] = first  # text, yes/no and lists: as the first round saw them
            continue
        numbers = [v for v in values if v is not None]
        mid = float(statistics.median(numbers))
        if all(isinstance(c["metrics"][key], int) and not isinstance(c["metrics"][key], bool) for c in rounds):
            metrics[key] = first if len(set(numbers)) == 1 else mid
        else:
            metrics[key] = mid
        spread[key] = [min(numbers), mid, max(numbers)]
        if len(numbers) > 1 and is_wide(min(numbers), mid, max(numbers), wide_spread):
            wide.append(key)
    leftovers = [c.get("leftover_processes") for c in rounds if c.get("leftover_processes") is not None]
    escaped = [c.get("escaped_processes") for c in rounds if c.get("escaped_processes") is not None]
    return {
        "status": "ok",
        "metrics": metrics,
        "spread": spread,
        "wide": wide,
        "rounds": len(rounds),
        "detail": "",
        "elapsed_s": round(sum(float(c.get("elapsed_s") or 0) for c in rounds), 3),
        "leftover_processes": sum(leftovers) if leftovers else None,
        **({"escaped_processes": sum(escaped)} if escaped else {}),
    }
