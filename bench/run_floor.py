"""Per-line cost of `toolfork run`'s worker-side work against the plain loop, in one process, no IPC.

Both read the same calls file and write the same records to a file: the plain loop is the benchmark's
own (``toolfork.bench.throughput.PLAIN_PY``, run here in-process), the other does for each line what a
fork worker of ``toolfork run`` does (parse and check it, run the tool with the hook rules, encode the
record). Usage: PYTHONPATH=. python bench/run_floor.py [LINES]. See bench/results/throughput.md,
"What parity would take".
"""
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from toolfork.bench.throughput import PLAIN_PY, TOOLS_PY
from toolfork.commands._input import read_call
from toolfork.commands._output import encode_ok_result
from toolfork.executor.invoke import execute_call

n_lines = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
tmp = Path(tempfile.mkdtemp(prefix="toolfork-run-floor-"))
(tmp / "floor_tools.py").write_text(TOOLS_PY)
sys.path.insert(0, str(tmp))
import floor_tools  # noqa: E402

calls = tmp / "calls.jsonl"
with calls.open("w") as f:
    for i in range(n_lines):
        f.write(json.dumps({"id": f"c{i}", "name": "add", "arguments": {"a": i, "b": 1}}) + "\n")
plain_code = compile(PLAIN_PY, "plain.py", "exec")


def plain() -> None:
    saved = sys.argv
    sys.argv = ["plain.py", str(calls), str(tmp / "out-plain.jsonl")]
    try:
        exec(plain_code, {"__name__": "__main__"})
    finally:
        sys.argv = saved


def toolfork_work() -> None:
    tools = {t.name: t for t in floor_tools.TOOLS}
    pid = os.getpid()
    with open(calls, "rb") as f, open(tmp / "out-toolfork.jsonl", "wb") as out:
        for i, line in enumerate(f, 1):
            c = read_call(line, i)
            r = execute_call(tools[c.name], c.id, c.arguments, None, None, None, pid)
            out.write(encode_ok_result(r) or b"")


best = {plain: float("inf"), toolfork_work: float("inf")}
for _ in range(5):  # alternating, best of five each: the least disturbed run of either
    for fn in best:
        start = time.perf_counter()
        fn()
        best[fn] = min(best[fn], (time.perf_counter() - start) / n_lines * 1e6)
print(f"plain loop: {best[plain]:.2f} us/line; toolfork worker's work: {best[toolfork_work]:.2f} us/line "
      f"({best[toolfork_work] / best[plain]:.2f}x)")
