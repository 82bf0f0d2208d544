"""What the ceiling on rebuilt values costs the host, on the data-only wire (sandboxed calls' frames).

Rows: a small result, a 1 MB text, 200,000 rows of three columns (7 MB), each decoded uncounted (a frame
MAX_GROWTH times under its ceiling) and counted (as a larger frame is); and the peak traced memory of
decoding a 100 MB text result, against the text itself (a result nests the text three levels deep).
Usage: PYTHONPATH=. python bench/ceiling.py  (prints milliseconds, ratios, and the peak as a multiple)
"""

from __future__ import annotations

import timeit
import tracemalloc
from typing import Any

from toolfork.executor.wire import dataonly
from toolfork.tools.output import ContentBlock, ToolOutput


def _frame(output: ToolOutput, context: Any = None) -> tuple[Any, ...]:
    return ("r", 0, "ok", output, None, 0.001, context)


def main() -> None:
    rows = [{"id": i, "name": f"n{i}", "score": i * 1.5} for i in range(200_000)]
    frames = {"small": _frame(ToolOutput([ContentBlock("text", "hello world")], False, {"a": 1, "b": [1, 2, 3]})),
              "1 MB text": _frame(ToolOutput([ContentBlock("text", "x" * 1_000_000)])),
              "200k rows": _frame(ToolOutput([ContentBlock("text", "rows")], False, rows))}
    print(f"{'frame':12} {'bytes':>10} {'uncounted ms':>13} {'counted ms':>11} {'ratio':>6}")
    for name, f in frames.items():
        data = dataonly.encode(f)
        n = max(1, int(2_000_000 / max(len(data), 1000)))
        ceiling = len(data) * dataonly.MAX_GROWTH // 2  # counted (a frame over ceiling / MAX_GROWTH), not reached
        plain = min(timeit.repeat(lambda: dataonly.decode(data), number=n, repeat=5)) / n  # noqa: B023
        counted = min(timeit.repeat(lambda: dataonly.decode(data, ceiling), number=n, repeat=5)) / n  # noqa: B023
        print(f"{name:12} {len(data):>10} {plain * 1e3:>13.3f} {counted * 1e3:>11.3f} {counted / plain:>6.2f}")
    text = "x" * 100_000_000
    data = dataonly.encode(_frame(ToolOutput([ContentBlock("text", text)])))
    tracemalloc.start()
    dataonly.decode(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"100 MB text: peak traced memory while decoding = {peak / len(text):.2f} x the text")


if __name__ == "__main__":
    main()
