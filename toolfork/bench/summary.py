"""The terminal summary of a run: the headline rows, each figure with its spread, within 100 columns.

    results ──▶ header (rounds, executors, time) ──▶ one table per group of executors that fits the width
            ──▶ "!" cells listed, load warnings, failures, one "not run: ..." line

A cell reads "29.4 ±12%": the median of the rounds and the largest gap from it to the slowest or the
fastest round, in percent of the median; "!" marks a wide spread (see ``spread``); "*" marks a figure
got without honouring what the calls ask (a timeout, limits: see ``honour``), explained below the table. The full table,
with every row and the min-max of each cell, goes to latest.md; this summary only picks the rows a
reader looks at first (your own calls' rows, when you benchmarked them).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from toolfork.bench.report import cell_value, fmt, load_lines, not_run_text, ranked, spread_of, unranked_lines

WIDTH = 100
LABEL_WIDTH = 34
HEADLINE_KEYS: tuple[str, ...] = (
    "user_wall_s",
    "user_ms_per_call",
    "user_ok",
    "io_wall_s",
    "cpu_wall_s",
    "small_median_ms",
    "tiny_us_per_call",
    "singles_us_per_call",
    "mixed_quick_done_s",
    "hang_still_running",
    "crash_results_back",
    "memory_uss_mb_median",
    "soak_calls_per_s",
    "fresh_fresh_ms",
)


def _cell(results: dict[str, Any], executor: str, metric: dict[str, Any]) -> str:
    text = _figure(results, executor, metric)
    return text if ranked(results, executor, metric) else text + "*"


def _figure(results: dict[str, Any], executor: str, metric: dict[str, Any]) -> str:
    text, value = cell_value(results, executor, metric)
    if value is None:
        return text.split(":")[0][:12]  # "n/a: calls run in the host" -> "n/a"
    found = spread_of(results, executor, metric)
    if found is None:
        return text
    (low, mid, high), wide = found
    if low == high:
        return text
    gap = max(high - mid, mid - low)
    pct = 0 if mid == 0 else round(100 * gap / abs(mid))
    return f"{fmt(mid, metric['unit'])} ±{pct}%" + ("!" if wide else "")


# Shorter labels for the headline rows (the full ones are in latest.md); {names} are config fields.
SHORT_LABELS: dict[str, str] = {
    "io_wall_s": "io: {io_calls} x {io_sleep_ms:g} ms, {io_workers} workers",
    "cpu_wall_s": "cpu: {cpu_calls} CPU-bound calls, wall",
    "small_median_ms": "small: batch of {small_calls}, median",
    "tiny_us_per_call": "tiny: {tiny_calls} calls, per call",
    "singles_us_per_call": "singles: {singles_calls} calls, per call",
    "mixed_quick_done_s": "mixed: quick calls done",
    "hang_still_running": "hang: calls left running",
    "crash_results_back": "crash: results back",
    "memory_uss_mb_median": "memory: per worker",
    "soak_calls_per_s": "soak: throughput",
    "fresh_fresh_ms": "fresh: process per call",
}


def _label(metric: dict[str, Any], config: dict[str, Any]) -> str:
    unit = "" if metric["unit"] in ("status", "yes/no") else f" ({metric['unit']})"
    label = metric["label"]
    short = SHORT_LABELS.get(metric["key"])
    if short:
        try:
            label = short.format(io_sleep_ms=config.get("io_sleep_s", 0) * 1e3, **config)
        except (KeyError, ValueError, TypeError):
            pass  # a config without those fields (an older results file): the full label
    room = LABEL_WIDTH - len(unit)
    if len(label) > room:
        label = label[: room - 1] + "…"
    return label + unit


def _tables(results: dict[str, Any], metrics: Sequence[dict[str, Any]], width: int) -> list[str]:
    executors: list[str] = results["executors"]
    grid = {ex: [_cell(results, ex, m) for m in metrics] for ex in executors}
    col = {ex: max(len(ex), *(len(t) for t in grid[ex])) + 2 for ex in executors}
    labels = [_label(m, results["meta"].get("config", {})) for m in metrics]
    label_w = max(len("lower is better, unless marked"), *(len(x) + 2 for x in labels))
    groups: list[list[str]] = [[]]
    used = label_w
    for ex in executors:
        if groups[-1] and used + col[ex] > width:
            groups.append([])
            used = label_w
        groups[-1].append(ex)
        used += col[ex]
    out: list[str] = []
    for group in groups:
        out.append("lower is better, unless marked".ljust(label_w) + "".join(ex.rjust(col[ex]) for ex in group))
        for i, (m, label) in enumerate(zip(metrics, labels, strict=True)):
            mark = " ^" if m.get("better") == "higher" else ""
            out.append((label + mark).ljust(label_w)[: label_w] + "".join(grid[ex][i].rjust(col[ex]) for ex in group))
        out.append("")
    return out


def _wrapped(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False)


def summary(results: dict[str, Any], paths: dict[str, str] | None = None, width: int = WIDTH) -> str:
    """The run in at most ``width`` columns (a path longer than that is the one exception)."""
    meta = results["meta"]
    present = {m["key"]: m for m in results["metrics"]}
    metrics = [present[k] for k in HEADLINE_KEYS if k in present] or list(results["metrics"])[:8]
    user = meta.get("user")
    what = f"{len(results['workloads'])} workloads" if results["workloads"] != ["user"] else "your calls"
    profile = "" if user else f" ({meta['profile']})"
    lines = [
        f"toolfork bench{profile}: {meta.get('rounds', 1)} interleaved rounds, "
        f"{len(results['executors'])} executors, {what}, {meta['duration_s']:.0f} s",
    ]
    if user:
        batch = f"as one batch on {user.get('workers')} workers"
        lines += _wrapped(f"your calls: {user['calls']} from {user['tools']}, {batch}", width)
        if user.get("skipped_lines"):
            lines += _wrapped(f"left out {len(user['skipped_lines'])} call line(s): {user['skipped_lines'][0]}", width)
    lines += _wrapped(
        "cells: median of the rounds ±widest gap to a round (% of median); ! wide spread; ^ higher is better",
        width,
    )
    lines.append("")
    lines += _tables(results, metrics, width)
    unranked = [line for line in unranked_lines(results)
                if any(line.startswith(f"{ex} x {m['workload']}: ") for ex in results["executors"] for m in metrics)]
    if unranked:
        lines += _wrapped("* not ranked, figures got without honouring what the calls ask:", width)
        for line in unranked:
            lines += _wrapped("  " + line, width)
    wide = [
        f"{ex} {m['key']}"
        for m in results["metrics"]
        for ex in results["executors"]
        if (found := spread_of(results, ex, m)) is not None and found[1]
    ]
    if wide:
        limit = meta.get("config", {}).get("wide_spread", 0.3)
        shown = ", ".join(wide[:6]) + (f" and {len(wide) - 6} more" if len(wide) > 6 else "")
        lines += _wrapped(
            f"WARNING: wide spread (max - min above {limit:.0%} of the median) in {len(wide)} cell(s): "
            f"{shown}. Those rounds disagree: rerun with more --rounds on a quieter machine.",
            width,
        )
    for line in load_lines(results):
        lines += _wrapped(line, width)
    for ex in results["executors"]:
        for w, cell in results["cells"].get(ex, {}).items():
            if cell["status"] in ("hung", "crashed", "error"):
                first = (str(cell.get("detail", "")).strip().splitlines() or [""])[0]
                lines.append(f"{ex} x {w}: {cell['status']}: {first}"[:width])
    missing = not_run_text(results)
    if missing:
        lines += _wrapped(missing, width)
    if paths:
        lines.append("full table, JSON and plots:")
        lines += [f"  {p}" for p in paths.values()]
    return "\n".join(lines).rstrip() + "\n"
