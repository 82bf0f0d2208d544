"""Per-line cost of `toolfork run`'s worker-side work against a plain loop, in one process, no IPC.

Usage: PYTHONPATH=. python bench/run_floor.py [LINES]  (writes its own tools and calls in a temp dir)
See bench/results/throughput.md, "What parity would take".
"""
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from toolfork.bench.throughput import TOOLS_PY
from toolfork.commands._input import read_call
from toolfork.commands._output import encode_ok_result
from toolfork.executor.invoke import execute_call

n_lines = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
tmp = Path(tempfile.mkdtemp(prefix="toolfork-run-floor-"))
(tmp / "floor_tools.py").write_text(TOOLS_PY)
sys.path.insert(0, str(tmp))
import floor_tools  # noqa: E402

add = floor_tools.add
lines = [json.dumps({"id": f"c{i}", "name": "add", "arguments": {"a": i, "b": 1}}).encode() for i in range(n_lines)]
FUNCTIONS = {"add": lambda a, b: a + b}


def plain() -> list[str]:
    out = []
    for line in lines:
        c = json.loads(line)
        t0 = time.perf_counter()
        v = FUNCTIONS[c["name"]](**c["arguments"])
        d = time.perf_counter() - t0
        out.append(json.dumps({"id": c["id"], "name": c["name"], "status": "ok", "output": {"content": [
            {"type": "text", "text": str(v)}], "is_error": False, "data": v}, "error": None,
            "duration_s": round(d, 6)}, ensure_ascii=False) + "\n")
    return out


def toolfork_work() -> list[bytes | None]:
    out = []
    pid = os.getpid()
    for i, line in enumerate(lines):
        c = read_call(line, i)
        r = execute_call(add, c.id, c.arguments, None, None, None, pid)
        out.append(encode_ok_result(r))
    return out


for f in (plain, toolfork_work, plain, toolfork_work):
    start = time.perf_counter()
    f()
    print(f"{f.__name__}: {(time.perf_counter() - start) / n_lines * 1e6:.2f} us/line")
