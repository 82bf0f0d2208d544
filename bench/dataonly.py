"""What the data-only codec costs against pickle (the warm tier's codec) and json, per result frame.

Rows: a small result (one text block and a little structured data) and a 1 MB text result, each
encoded in the worker and decoded in the host; json stands for "json with a tagged form for bytes"
(the tags are left out, which only flatters it). Usage: PYTHONPATH=. python bench/dataonly.py
Prints microseconds and the ratio to pickle.
"""

from __future__ import annotations

import json
import pickle
import timeit
from typing import Any

from toolfork.executor.wire import dataonly
from toolfork.tools.output import ContentBlock, ToolOutput


def _json(f: tuple[Any, ...]) -> bytes:
    out = f[3]
    return json.dumps([f[0], f[1], f[2], {"content": [b.to_dict() for b in out.content], "is_error": out.is_error,
                                          "data": out.data}, None, f[5], None]).encode()


def main() -> None:
    frames = {"small": ("r", "c1", "ok", ToolOutput([ContentBlock("text", "hello world")], False,
                                                    {"a": 1, "b": [1, 2, 3]}), None, 0.001, None),
              "1 MB": ("r", "c1", "ok", ToolOutput([ContentBlock("text", "x" * 1_000_000)], False, None), None,
                       0.001, None)}
    print(f"{'frame':6s} {'codec':10s} {'encode+decode us':>16s} {'x pickle':>9s}")
    for name, f in frames.items():
        n = 20000 if name == "small" else 200
        codecs = {"pickle": (lambda f=f: pickle.dumps(f, 5), pickle.loads),
                  "msgpack": (lambda f=f: dataonly.encode(f), dataonly.decode_or_marker),
                  "json": (lambda f=f: _json(f), json.loads)}
        base = None
        for label, (enc, dec) in codecs.items():
            payload = enc()
            cost = min(timeit.repeat(lambda enc=enc, dec=dec, payload=payload: (enc(), dec(payload)),
                                     number=n, repeat=5)) / n * 1e6
            base = base or cost
            print(f"{name:6s} {label:10s} {cost:16.2f} {cost / base:9.2f}")


if __name__ == "__main__":
    main()
