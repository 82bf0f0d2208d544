"""What the journal of ``toolfork run`` costs per call: one job run three ways, timed end to end.

* no journal: ``-o -`` with stdout redirected to a file (a job that cannot be resumed keeps none);
* journal: ``-o OUT.jsonl`` (each start entry written with ``os.write`` before the call is sent);
* durable: ``-o OUT.jsonl --durable`` (and ``fdatasync`` before the calls are sent).

Each way runs the same trivial calls (``add``) on the line lane and on the general path
(``TOOLFORK_LINE_LANE=0``); the best of ``REPEATS`` runs is kept. Usage:
PYTHONPATH=. python bench/journal.py [CALLS] [WORKERS]. See docs/cli-run.md, "Exactly once".
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolfork.bench.throughput import TOOLS_PY

REPEATS = 3
n_calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
workers = sys.argv[2] if len(sys.argv) > 2 else "2"
tmp = Path(tempfile.mkdtemp(prefix="toolfork-journal-bench-"))
(tmp / "tools.py").write_text(TOOLS_PY)
calls = tmp / "calls.jsonl"
with calls.open("w") as f:
    for i in range(n_calls):
        f.write(json.dumps({"id": f"c{i}", "name": "add", "arguments": {"a": i, "b": 1}}) + "\n")


def timed(extra: list[str], lane: str) -> float:
    out = tmp / "out.jsonl"
    best = float("inf")
    for _ in range(REPEATS):
        for stale in (out, Path(f"{out}.journal")):
            stale.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "toolfork", "run", str(calls), "--tools", str(tmp / "tools.py"), "-q",
               "--workers", workers, *extra]
        env = dict(os.environ, TOOLFORK_LINE_LANE=lane)
        with open(out, "wb") as sink:
            start = time.perf_counter()
            subprocess.run(cmd if extra else [*cmd, "-o", "-"], stdout=sink, env=env, check=True)
            best = min(best, time.perf_counter() - start)
    return best


print(f"{n_calls} calls of add, {workers} workers, best of {REPEATS}")
print("| path | no journal | journal | durable | journal / none | durable / none |")
print("|---|---|---|---|---|---|")
for name, lane in (("line lane", "1"), ("general", "0")):
    none = timed([], lane)
    journal = timed(["-o", str(tmp / "out.jsonl")], lane)
    durable = timed(["-o", str(tmp / "out.jsonl"), "--durable"], lane)
    per = [1e6 * t / n_calls for t in (none, journal, durable)]
    print(f"| {name} | {per[0]:.1f} us/call | {per[1]:.1f} us/call | {per[2]:.1f} us/call | "
          f"{journal / none:.2f} | {durable / none:.2f} |")

# The journal's own work, in one process: what each level adds to a call, without the noise of a job.
from toolfork.executor.journal import Journal  # noqa: E402

n = min(n_calls, 5_000)
print(f"\nthe journal alone, {n} starts, in-process")
print("| level | one start a write | 64 starts a write (the line lane) |")
print("|---|---|---|")
for durable in (False, True):
    cells = []
    for group in (1, 64):
        path = tmp / f"alone-{durable}-{group}.journal"
        with Journal(path, durable=durable, keep_results=False) as journal:
            ids = [f"c{i}" for i in range(n)]
            start = time.perf_counter()
            for i in range(0, n, group):
                journal.start(ids[i:i + group])
            cells.append(f"{1e6 * (time.perf_counter() - start) / n:.2f} us/call")
    print(f"| {'durable (fdatasync)' if durable else 'journal (os.write)'} | {cells[0]} | {cells[1]} |")
