"""Throughput rows: the frame reader's read size, and ``toolfork run`` against a plain loop.

``python -m toolfork.bench.throughput [--lines N] [--out FILE]`` measures, in one run:

* the pipe reader's read size (64 KiB against 1 MiB reads): trivial calls, batches of four, a 100 KB
  result (still through the pipe) on one warm pool of 2 workers, the two sizes taking turns so that
  both see the same machine load;
* ``toolfork run`` on N trivial calls in fork mode (2 workers) and in sequential mode, against a plain
  Python loop that parses each line, calls the function and writes the same record; each in a process
  of its own, taking turns, with its peak memory; the outputs are checked to hold the same records in
  the same order (duration_s aside).

It writes a Markdown report (default: print it). The payload rows are in ``toolfork bench --only
payloads``; these rows are toolfork-only, so they live here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

READ_SIZES = (1 << 16, 1 << 20)

TOOLS_PY = '''from toolfork import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


TOOLS = [add]
'''

# The plain loop: what a user would write without toolfork (same record, same order).
PLAIN_PY = '''import json, sys, time


def add(a, b):
    return a + b


FUNCTIONS = {"add": add}
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "w") as out:
    for line in f:
        c = json.loads(line)
        t0 = time.perf_counter()
        v = FUNCTIONS[c["name"]](**c["arguments"])
        d = time.perf_counter() - t0
        out.write(json.dumps({"id": c["id"], "name": c["name"], "status": "ok", "output": {"content": [
            {"type": "text", "text": str(v)}], "is_error": False, "data": v}, "error": None,
            "duration_s": round(d, 6)}, ensure_ascii=False) + "\\n")
'''


def _median_ms(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def read_size_rows(rounds: int = 5) -> list[tuple[str, dict[int, float]]]:
    """Per read size: trivial call (us), batch of 4 (ms), one 100 KB result (ms); medians of rounds."""
    from toolfork.bench.calls import toolfork_tools
    from toolfork.executor import Executor, ToolCall
    from toolfork.executor.wire import framing

    saved = framing.READ_CHUNK
    figures: dict[str, dict[int, list[float]]] = {"tiny": {}, "small": {}, "100KB": {}}
    tiny = [ToolCall(str(i), "trivial_call", {"x": i}) for i in range(1000)]
    small = [ToolCall(str(i), "trivial_call", {"x": i}) for i in range(4)]
    payload = [ToolCall("p", "payload_call", {"nbytes": 100_000})]
    try:
        with Executor(toolfork_tools(), mode="fork", workers=2) as ex:
            ex.run(tiny)
            for _ in range(rounds):
                for size in READ_SIZES:
                    framing.READ_CHUNK = size
                    figures["tiny"].setdefault(size, []).append(_median_ms(lambda: ex.run(tiny), 3) * 1e3 / len(tiny))
                    figures["small"].setdefault(size, []).append(_median_ms(lambda: ex.run(small), 200))
                    figures["100KB"].setdefault(size, []).append(_median_ms(lambda: ex.run(payload), 20))
    finally:
        framing.READ_CHUNK = saved
    labels = {"tiny": "1000 trivial calls, per call (us)", "small": "batch of 4 trivial calls, median (ms)",
              "100KB": "one 100 KB result (through the pipe), median (ms)"}
    return [(labels[k], {s: statistics.median(v) for s, v in per.items()}) for k, per in figures.items()]


def payload_rows(executors: list[str], sizes: tuple[int, ...], reps: int,
                 kinds: tuple[str, ...] | None = None) -> dict[str, dict[str, float]]:
    """Median ms of one call returning each payload (kind x size) on every executor, all pools up at
    once and taking turns call by call, so that every executor sees the same machine load (on a shared
    machine, the peer table's cells, run one after the other, drift with the load)."""
    from toolfork.bench.base import Task
    from toolfork.bench.batch import require_ok, run_batch, warm_up
    from toolfork.bench.config import size_label
    from toolfork.bench.payload_calls import PAYLOAD_KINDS, is_whole_payload
    from toolfork.bench.peers import resolve

    peers = {}
    for spec in executors:
        cls = resolve(spec)
        peer = cls(2)
        peer.start()
        warm_up(peer, 2)
        peers[cls.name or spec] = peer
    times: dict[str, dict[str, list[float]]] = {}
    try:
        for kind in kinds or PAYLOAD_KINDS:
            for size in sizes:
                row = times.setdefault(f"{kind} {size_label(size)}", {})
                for _ in range(reps):
                    for name, peer in peers.items():
                        outcomes, dt = run_batch(peer, [Task(f"payload_{kind}", {"nbytes": size})])
                        require_ok(f"{name} {kind} {size_label(size)}", outcomes)
                        if not is_whole_payload(kind, outcomes[0].value, size):
                            raise RuntimeError(f"{name}: {kind} {size_label(size)} came back incomplete")
                        outcomes.clear()
                        row.setdefault(name, []).append(dt * 1e3)
    finally:
        for peer in peers.values():
            peer.close()
    return {row: {name: statistics.median(v) for name, v in per.items()} for row, per in times.items()}


def payload_markdown(rows: dict[str, dict[str, float]], reps: int) -> str:
    names = list(next(iter(rows.values())))
    out = [f"## Large results, interleaved (median of {reps}; ms; every pool up at once, taking turns call by call)",
           "", "| result | " + " | ".join(names) + " | toolfork / threads | toolfork - threads (ms) |",
           "|---|" + "---:|" * (len(names) + 2)]
    for row, per in rows.items():
        ratio = per["toolfork"] / per["threads"] if "threads" in per and "toolfork" in per else float("nan")
        diff = per["toolfork"] - per["threads"] if "threads" in per and "toolfork" in per else float("nan")
        out.append(f"| {row} | " + " | ".join(f"{per[n]:.3g}" for n in names) + f" | {ratio:.2f}x | {diff:.2f} |")
    out.append("")
    return "\n".join(out)


def _run_child(argv: list[str], cwd: str) -> tuple[float, int]:
    """Wall seconds and peak RSS (KB) of a child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {err[-2000:]}")
    return wall, usage.ru_maxrss


def _records(path: Path) -> list[tuple[Any, ...]]:
    out = []
    with path.open("rb") as f:
        for line in f:
            r = json.loads(line)
            out.append((r["id"], r["name"], r["status"], json.dumps(r["output"], sort_keys=True), r["error"]))
    return out


# ``toolfork run`` with the line lane turned off: every call through Executor.imap, as before the lane.
_GENERAL_PATH = ("import os, sys; os.environ['TOOLFORK_LINE_LANE'] = '0'; from toolfork.cli import main; "
                 "sys.exit(main())")


def run_rows(lines: int, rounds: int = 2, before: str | None = None) -> dict[str, Any]:
    """lines/s and peak memory of toolfork run (fork, sequential) and the plain loop, on ``lines``;
    ``before``: a source tree of an earlier toolfork, run the same way for a before/after in one run."""
    root = Path(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or ".").resolve()
    env_python = [sys.executable]
    with tempfile.TemporaryDirectory(prefix="toolfork-run-bench-") as tmp:
        d = Path(tmp)
        (d / "tools.py").write_text(TOOLS_PY)
        (d / "plain.py").write_text(PLAIN_PY)
        calls = d / "calls.jsonl"
        with calls.open("w") as f:
            for i in range(lines):
                f.write(json.dumps({"id": f"c{i}", "name": "add", "arguments": {"a": i, "b": 1}}) + "\n")
        variants = {
            "plain loop": [*env_python, str(d / "plain.py"), str(calls), str(d / "out-plain.jsonl")],
            "toolfork run, fork, 2 workers": [*env_python, "-m", "toolfork", "run", str(calls), "-o",
                                              str(d / "out-fork.jsonl"), "--mode", "fork", "--workers", "2", "-q"],
            "toolfork run, fork, 2 workers, general path": [
                *env_python, "-c", _GENERAL_PATH, "run", str(calls), "-o", str(d / "out-general.jsonl"),
                "--mode", "fork", "--workers", "2", "-q"],
            "toolfork run, sequential": [*env_python, "-m", "toolfork", "run", str(calls), "-o",
                                         str(d / "out-sequential.jsonl"), "--mode", "sequential", "-q"],
        }
        if before:
            runner = f"import sys; sys.path.insert(0, {before!r}); from toolfork.cli import main; sys.exit(main())"
            for mode in ("fork", "sequential"):
                argv = [*env_python, "-c", runner, "run", str(calls), "-o", str(d / f"out-before-{mode}.jsonl"),
                        "--mode", mode, "-q"] + (["--workers", "2"] if mode == "fork" else [])
                variants[f"before: toolfork run, {mode}"] = argv
        walls: dict[str, list[float]] = {k: [] for k in variants}
        rss: dict[str, int] = {k: 0 for k in variants}
        for _ in range(rounds):
            for name, argv in variants.items():
                wall, peak = _run_child(argv, str(root))
                walls[name].append(wall)
                rss[name] = max(rss[name], peak)
        plain = _records(d / "out-plain.jsonl")
        same = {name: _records(d / f"out-{key}.jsonl") == plain for name, key in
                (("toolfork run, fork, 2 workers", "fork"), ("toolfork run, sequential", "sequential"),
                 ("toolfork run, fork, 2 workers, general path", "general"))}
        if before:
            for mode in ("fork", "sequential"):
                same[f"before: toolfork run, {mode}"] = \
                    _records(d / f"out-before-{mode}.jsonl") == plain
    best = {k: min(v) for k, v in walls.items()}
    # On a shared machine the speed drifts between rounds: each variant is also compared with the
    # plain loop of its own round, and the median of those ratios is reported.
    plain_walls = walls["plain loop"]
    ratios = {k: statistics.median([p / w for p, w in zip(plain_walls, v, strict=True)]) for k, v in walls.items()}
    return {"lines": lines, "wall_s": best, "peak_rss_kb": rss, "same_output": same, "round_ratio": ratios,
            "rounds": rounds, "lines_per_s": {k: lines / v for k, v in best.items()}}


def markdown(read_rows: list[tuple[str, dict[int, float]]] | None, run: dict[str, Any] | None) -> str:
    out = [f"# Throughput rows ({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, "
           f"{os.cpu_count()} cores, Python {sys.version.split()[0]})", ""]
    if read_rows:
        out += ["## Pipe read size (fork pool, 2 workers; medians, the two sizes taking turns)", "",
                "| metric | 64 KiB reads | 1 MiB reads | 1 MiB / 64 KiB |", "|---|---:|---:|---:|"]
        for label, per in read_rows:
            a, b = per[READ_SIZES[0]], per[READ_SIZES[1]]
            out.append(f"| {label} | {a:.3g} | {b:.3g} | {b / a:.2f}x |")
        out.append("")
    if run:
        plain = run["lines_per_s"]["plain loop"]
        out += [f"## `toolfork run` on {run['lines']:,} trivial calls (best of the rounds; each variant in a "
                "process of its own)", "",
                f"| variant | wall (s) | lines/s | vs plain loop | vs plain loop, same round (median of "
                f"{run['rounds']}) | peak RSS (MB) | same records, same order |",
                "|---|---:|---:|---:|---:|---:|---|"]
        for name, wall in run["wall_s"].items():
            lps = run["lines_per_s"][name]
            same = run["same_output"].get(name, True)
            out.append(f"| {name} | {wall:.2f} | {lps:,.0f} | {lps / plain:.2f}x | {run['round_ratio'][name]:.2f}x | "
                       f"{run['peak_rss_kb'][name] / 1024:.0f} | {'yes' if same else 'NO'} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolfork.bench.throughput")
    parser.add_argument("--lines", type=int, default=200_000, help="trivial calls for the run rows (200000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the run rows (2)")
    parser.add_argument("--skip-read-size", action="store_true")
    parser.add_argument("--skip-run", action="store_true")
    parser.add_argument("--payloads", default=None, metavar="EXECUTOR,...",
                        help="also time the payload rows interleaved on these executors (e.g. toolfork,threads)")
    parser.add_argument("--payload-reps", type=int, default=7)
    parser.add_argument("--payload-kinds", default=None, metavar="KIND,...", help="str, file, rows (all)")
    parser.add_argument("--before", default=None, metavar="DIR",
                        help="source tree of an earlier toolfork: its run rows too, for before/after")
    parser.add_argument("--out", default=None, help="write the Markdown here (default: print it)")
    args = parser.parse_args(argv)
    read_rows = None if args.skip_read_size else read_size_rows()
    run = None if args.skip_run else run_rows(args.lines, args.rounds, args.before)
    text = markdown(read_rows, run)
    if args.payloads:
        from toolfork.bench.config import MB

        sizes = (1 * MB, 10 * MB, 100 * MB)
        kinds = tuple(args.payload_kinds.split(",")) if args.payload_kinds else None
        text += "\n" + payload_markdown(payload_rows(args.payloads.split(","), sizes, args.payload_reps, kinds),
                                         args.payload_reps)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
