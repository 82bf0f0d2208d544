"""Turns a run's results into latest.md (the side-by-side table), latest.json and PNG plots.

The table's last column compares toolfork's fork pool with the best peer on that row, as a factor
that is above 1 when toolfork is better whichever way the metric points, so a reader never has to
remember whether lower or higher wins. A cell whose executor did not honour what its workload asks (a
call's timeout, the tools' limits: ``results["unhonoured"]``, see ``honour``) carries a tag saying so
and is never bold nor the best peer of a ratio.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

from toolfork.bench.peers import is_toolfork

TOOLFORK = "toolfork"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def fmt(value: Any, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "yes/no":
        return "yes" if value else "no"
    if unit == "status":
        return str(value)
    v = _num(value)
    if v is None:
        return str(value)
    if unit == "count":
        return f"{v:.0f}" if v == int(v) else f"{v:.1f}"
    if unit == "calls/s":
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
    if unit == "MB":
        return f"{v:.1f}"
    return f"{v:.4g}" if unit == "s" else f"{v:.3g}"


def cell_value(results: dict[str, Any], executor: str, metric: dict[str, Any]) -> tuple[str, float | None]:
    """The text shown for one executor on one metric row, and its number when it has one."""
    cell = results["cells"].get(executor, {}).get(metric["workload"])
    if cell is None:
        return "not run", None
    if cell["status"] != "ok":
        return str(cell["status"]), None
    value = cell.get("metrics", {}).get(metric["key"])
    return fmt(value, metric["unit"]), _num(value)


def unhonoured_of(results: dict[str, Any], executor: str, workload: str) -> list[dict[str, str]]:
    """What the executor did not honour on that workload ({"tag", "text"} each; none for most cells)."""
    found: list[dict[str, str]] = results.get("unhonoured", {}).get(executor, {}).get(workload, [])
    return found


def ranked(results: dict[str, Any], executor: str, metric: dict[str, Any]) -> bool:
    """Whether the cell may be compared: an ok figure got by honouring what the workload asks."""
    return not unhonoured_of(results, executor, metric["workload"])


def spread_of(results: dict[str, Any], executor: str, metric: dict[str, Any]) -> tuple[list[float], bool] | None:
    """([min, median, max] over the rounds, whether that is wide) for a cell that has them."""
    cell = results["cells"].get(executor, {}).get(metric["workload"], {})
    values = cell.get("spread", {}).get(metric["key"]) if cell.get("status") == "ok" else None
    if not values or len(values) != 3:
        return None
    return values, metric["key"] in cell.get("wide", [])


def spread_text(results: dict[str, Any], executor: str, metric: dict[str, Any]) -> str:
    """The cell as the full table shows it: "29.4 (26.2-66.6)!" ("!" when the spread is wide)."""
    text, _ = cell_value(results, executor, metric)
    found = spread_of(results, executor, metric)
    tags = "".join(f" ({u['tag']})" for u in unhonoured_of(results, executor, metric["workload"]))
    if found is None or metric["unit"] in ("status", "yes/no"):
        return text + tags
    (low, _mid, high), wide = found
    if low == high:
        return text + tags
    return f"{text} ({fmt(low, metric['unit'])}-{fmt(high, metric['unit'])})" + ("!" if wide else "") + tags


def _in_process(results: dict[str, Any], executor: str) -> bool:
    return bool(results.get("kinds", {}).get(executor, {}).get("in_process"))


def best_peer(
    results: dict[str, Any], metric: dict[str, Any], processes_only: bool = False
) -> tuple[str, float] | None:
    """The best non-toolfork executor on a row, among the cells that honoured what the workload asks;
    ``processes_only`` leaves out the in-process ones (threads), which are fast on trivial calls but can
    neither kill a call nor survive a crash."""
    if metric.get("better") not in ("lower", "higher"):
        return None
    values = []
    for ex in results["executors"]:
        if is_toolfork(ex) or (processes_only and _in_process(results, ex)) or not ranked(results, ex, metric):
            continue
        _, v = cell_value(results, ex, metric)
        if v is not None:
            values.append((ex, v))
    if not values:
        return None
    pick = min if metric["better"] == "lower" else max
    return pick(values, key=lambda item: item[1])


def ratio_text(results: dict[str, Any], metric: dict[str, Any], processes_only: bool = False) -> str:
    """toolfork against the best peer: "2.31x (pebble)", above 1 when toolfork is better."""
    best = best_peer(results, metric, processes_only)
    if best is None or TOOLFORK not in results["executors"]:
        return "—"
    _, tf = cell_value(results, TOOLFORK, metric)
    peer, pv = best
    if tf is None or tf <= 0 or pv <= 0:
        return "—"
    factor = pv / tf if metric["better"] == "lower" else tf / pv
    return f"{factor:.2f}x ({peer})"


def _leftover_total(results: dict[str, Any], executor: str) -> int | None:
    cells = results["cells"].get(executor, {})
    counted = [
        (c.get("leftover_processes") or 0) + (c.get("escaped_processes") or 0)
        for c in cells.values()
        if c.get("leftover_processes") is not None or c.get("escaped_processes")
    ]
    return sum(counted) if counted else None


def title(results: dict[str, Any]) -> str:
    """What was run: your calls (``--calls``), else the profile's workloads."""
    user = results["meta"].get("user")
    if user:
        return f"your {user['calls']} calls from {user['tools']}"
    return f"{results['meta']['profile']} run"


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    executors: list[str] = results["executors"]
    lines = [
        f"# toolfork benchmark ({title(results)})",
        "",
        f"{meta['started']}, {meta['cores']} cores, Python {meta['python']}, {meta['platform']}; "
        f"isolation: one runner process per {meta['isolation']}; took {meta['duration_s']} s.",
        f"Each cell: the median of {meta.get('rounds', 1)} interleaved rounds, (min-max) of the rounds; "
        "! marks a wide spread (max - min above "
        f"{meta.get('config', {}).get('wide_spread', 0.3):.0%} of the median).",
        "Lower is better unless the row says calls/s or results back. Last two columns: toolfork's fork "
        "pool against the best peer on that row, and against the best peer that runs calls in worker "
        "processes (threads excluded); above 1 = toolfork better. Bold: best on the row. A tag in "
        "parentheses: the executor did not honour what the calls ask (see Not ranked); such a cell is "
        "never bold nor the best peer.",
        *load_lines(results),
        "",
    ]
    header = ["metric", "ideal", "target", *executors, "toolfork vs best peer", "vs best process peer"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    for m in results["metrics"]:
        texts = []
        numbers = []
        for ex in executors:
            _, v = cell_value(results, ex, m)
            texts.append(spread_text(results, ex, m))
            numbers.append(v if ranked(results, ex, m) else None)
        if m.get("better") in ("lower", "higher"):
            known = [v for v in numbers if v is not None]
            if len(known) > 1:
                top = min(known) if m["better"] == "lower" else max(known)
                texts = [f"**{t}**" if v == top else t for t, v in zip(texts, numbers, strict=True)]
        unit = "" if m["unit"] in ("status", "yes/no") else f" ({m['unit']})"
        row = [
            m["label"] + unit,
            fmt(m.get("ideal"), m["unit"]),
            m.get("target_text") or "",
            *texts,
            ratio_text(results, m),
            ratio_text(results, m, processes_only=True),
        ]
        lines.append("| " + " | ".join(row) + " |")
    left = [_leftover_total(results, ex) for ex in executors]
    lines.append(
        "| processes left behind after close, all cells (count) | 0 | | "
        + " | ".join("—" if v is None else str(v) for v in left)
        + " | — | — |"
    )
    missing = not_run_text(results)
    if missing:
        lines += ["", missing]
    for section in (targets_section, unranked_section, executors_section, failures_section):
        found = section(results)
        lines += ["", *found] if found else []
    plots = [p for p in ("scaling.png", "overhead.png") if p in results.get("plots", [])]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p[:-4]}]({p})" for p in plots]
    return "\n".join(lines).rstrip() + "\n"


def load_lines(results: dict[str, Any]) -> list[str]:
    """The machine's load during the run, and a warning line when it makes the figures less sure."""
    load = results["meta"].get("load")
    if not load:
        return []
    start, end = load.get("load_start"), load.get("load_end")
    avg = "" if start is None else f"; load average {start:.1f} at the start, {end:.1f} at the end"
    others, steal = load["others_share"], load["steal_share"]
    out = [f"Machine: other processes used {others:.0%} of the CPU, steal {steal:.0%}{avg}."]
    if load.get("warnings"):
        out.append("WARNING: a loaded machine: " + "; ".join(load["warnings"]) + ".")
    return out


def not_run_text(results: dict[str, Any]) -> str | None:
    """ "not run: ray, toolfork-ray (not installed); ..." executors grouped by why they did not run."""
    by_reason: dict[str, list[str]] = {}
    for name, why in (results.get("not_run") or {}).items():
        by_reason.setdefault(why, []).append(name)
    if not by_reason:
        return None
    return "not run: " + "; ".join(f"{', '.join(names)} ({why})" for why, names in by_reason.items())


def targets_section(results: dict[str, Any]) -> list[str]:
    out = ["## toolfork against the targets", ""]
    if TOOLFORK not in results["executors"]:
        return [*out, "toolfork was not part of this run."]
    for m in results["metrics"]:
        if m.get("target") is None:
            continue
        text, v = cell_value(results, TOOLFORK, m)
        if v is None:
            verdict = f"no figure ({text})"
        else:
            ok = v >= m["target"] if m.get("better") == "higher" else v <= m["target"]
            verdict = ("met" if ok else "missed") + f": {text} {m['unit']} (target {m['target_text']})"
        out.append(f"- {m['label']}: {verdict}")
    return out


def unranked_lines(results: dict[str, Any]) -> list[str]:
    """ "fork-per-call x user: has no per-call timeout: ..." for every cell shown but not ranked."""
    return [f"{ex} x {w}: " + "; ".join(u["text"] for u in found)
            for ex in results["executors"]
            for w, found in results.get("unhonoured", {}).get(ex, {}).items()
            if found and results["cells"].get(ex, {}).get(w, {}).get("status") == "ok"]


def unranked_section(results: dict[str, Any]) -> list[str]:
    found = unranked_lines(results)
    if not found:
        return []
    return ["## Not ranked", "", "Figures got without honouring what the workload asks: shown, never compared.",
            "", *[f"- {line}" for line in found]]


def executors_section(results: dict[str, Any]) -> list[str]:
    out = ["## Executors", ""]
    for ex in results["executors"]:
        out.append(f"- **{ex}**: {results.get('descriptions', {}).get(ex, '')}")
    return out


def failures_section(results: dict[str, Any]) -> list[str]:
    out = []
    for ex in results["executors"]:
        for w, cell in results["cells"].get(ex, {}).items():
            if cell["status"] in ("hung", "crashed", "error"):
                first = str(cell.get("detail", "")).strip().splitlines()
                out.append(f"- {ex} x {w}: {cell['status']}" + (f": {first[0][:200]}" if first else ""))
    return (["## Hung, crashed and failed cells", "", *out]) if out else []


def _clean(value: Any) -> Any:
    """JSON without NaN/inf (not valid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def plot(results: dict[str, Any], out_dir: str) -> list[str]:
    """scaling.png and overhead.png; returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    executors = results["executors"]
    workers = list(results["meta"]["config"]["scaling_workers"])
    if "scaling" in results["workloads"]:
        fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
        for ax, kind in zip(axes, ("io", "cpu"), strict=True):
            for ex in executors:
                cell = results["cells"].get(ex, {}).get("scaling", {})
                if cell.get("status") != "ok":
                    continue
                ys = [cell["metrics"].get(f"scaling_{kind}_w{w}") for w in workers]
                color = f"C{executors.index(ex) % 10}"  # the same colour for an executor in both panels
                ax.plot(workers, ys, marker="o", label=ex, color=color, linewidth=2.5 if is_toolfork(ex) else 1.2)
            ideal = [m.get("ideal") for m in results["metrics"] if m["key"].startswith(f"scaling_{kind}_w")]
            if all(v is not None for v in ideal):
                ax.plot(workers, ideal, "k--", label="ideal", linewidth=1)
            ax.set_xscale("log", base=2)
            ax.set_xticks(workers, [str(w) for w in workers])
            ax.set_xlabel("workers")
            ax.set_ylabel("calls/s")
            ax.set_title(f"{kind}-bound calls: throughput against workers")
            ax.grid(True, alpha=0.3)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8)
        fig.tight_layout(rect=(0, 0.12, 1, 1))
        fig.savefig(os.path.join(out_dir, "scaling.png"), dpi=100)
        plt.close(fig)
        written.append("scaling.png")
    panels = [
        (k, t)
        for k, t in (
            ("tiny_us_per_call", "per-call overhead, 1,000 trivial calls (us)"),
            ("small_median_ms", "batch of 4 trivial calls, median (ms)"),
        )
        if any(m["key"] == k for m in results["metrics"])
    ]
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
        for ax, (key, title) in zip(axes[0], panels, strict=True):
            metric = next(m for m in results["metrics"] if m["key"] == key)
            names, values = [], []
            for ex in executors:
                _, v = cell_value(results, ex, metric)
                if v is not None and v > 0:
                    names.append(ex)
                    values.append(v)
            colors = ["tab:red" if is_toolfork(n) else "tab:blue" for n in names]
            ax.bar(range(len(values)), values, color=colors)
            ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
            ax.set_yscale("log")
            if metric.get("target") is not None:
                ax.axhline(metric["target"], color="k", linestyle="--", linewidth=1, label="target")
                ax.legend(fontsize=8)
            ax.set_title(title)
            ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "overhead.png"), dpi=100)
        plt.close(fig)
        written.append("overhead.png")
    return written


def write_report(results: dict[str, Any], out_dir: str, plots: bool = True) -> dict[str, str]:
    """Write latest.json, latest.md and the plots into ``out_dir``; returns their paths by kind."""
    os.makedirs(out_dir, exist_ok=True)
    names: Sequence[str] = []
    if plots:
        try:
            names = plot(results, out_dir)
        except ImportError as exc:  # matplotlib is in the bench extra, not a core dependency
            results["plots_skipped"] = f"{exc}; pip install 'toolfork[bench]' for the plots"
    results["plots"] = list(names)
    paths = {"json": os.path.join(out_dir, "latest.json"), "markdown": os.path.join(out_dir, "latest.md")}
    with open(paths["json"], "w") as fh:
        json.dump(_clean(results), fh, indent=1, sort_keys=False)
        fh.write("\n")
    with open(paths["markdown"], "w") as fh:
        fh.write(markdown(results))
    for name in names:
        paths[name[:-4]] = os.path.join(out_dir, name)
    return paths
