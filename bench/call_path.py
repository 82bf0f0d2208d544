r"""How many times one call's path changes file, from ``Executor.run`` to the worker and back.

A reader following one call through the code jumps from file to file; this counts those jumps on the
real path instead of by reading. One warm fork worker runs one trivial call; ``sys.setprofile``
records, in the host's calling thread and in the worker (from ``on_worker_start``), where control is
after each call or return of a Python function (the frame entered, or the package's frame returned
to). Consecutive events in one file are one stop; a change of file is a step from one stop to the
next. Frames of the standard library are not counted (their callers are).

    PYTHONPATH=. python bench/call_path.py                         # this tree
    PYTHONPATH=/tmp/old python bench/call_path.py --package toolfork   # another tree's ``toolfork``
    PYTHONPATH=/tmp/before python bench/call_path.py --package toolfork_before

``--show`` prints the stops in order, so a layer that only forwards can be seen.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from typing import Any

_FD = -1
_ROOT = ""


def _record_in_worker() -> None:
    """``on_worker_start``: every frame of the package this worker enters or leaves, one line each."""
    def profile(frame: Any, event: str, _arg: Any) -> None:
        where = _where(frame, event)
        if where is not None:
            os.write(_FD, f"{where}\n".encode())

    sys.setprofile(profile)


def _where(frame: Any, event: str) -> str | None:
    """Where control is after ``event``: the frame entered, or the one returned to (None: not ours)."""
    if event == "return":
        frame = frame.f_back
    elif event != "call":
        return None
    if frame is None or not frame.f_code.co_filename.startswith(_ROOT):
        return None
    return f"{frame.f_code.co_filename[len(_ROOT):]}:{frame.f_code.co_name}"


def stops(lines: list[str]) -> list[str]:
    """Consecutive events in one file collapsed into one stop (file: the first function seen there)."""
    out: list[str] = []
    for line in lines:
        if not out or out[-1].split(":")[0] != line.split(":")[0]:
            out.append(line)
    return out


def main() -> None:
    global _FD, _ROOT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default="toolfork")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    package = importlib.import_module(args.package)
    _ROOT = os.path.dirname(package.__file__) + os.sep
    executor = importlib.import_module(f"{args.package}.executor")
    tools = importlib.import_module(f"{args.package}.tools")
    from toolfork.bench.calls import trivial_call

    with tempfile.NamedTemporaryFile("w+", suffix=".path") as worker_log:
        _FD = os.open(worker_log.name, os.O_WRONLY | os.O_APPEND)
        ex = executor.Executor([tools.tool(name="trivial")(trivial_call)], mode="fork", workers=1,
                               on_worker_start=_record_in_worker)
        try:
            call = executor.ToolCall
            for i in range(3):  # warm: lazy imports and first-call paths are behind us
                ex.run([call(f"w{i}", "trivial", {"x": i})])
            time.sleep(0.2)
            os.truncate(worker_log.name, 0)
            host: list[str] = []

            def profile(frame: Any, event: str, _arg: Any) -> None:
                where = _where(frame, event)
                if where is not None:
                    host.append(where)

            calls = [call("c1", "trivial", {"x": 1})]
            sys.setprofile(profile)
            result = ex.run(calls)[0]
            sys.setprofile(None)
            assert result.status == "ok", result
            time.sleep(0.2)
            with open(worker_log.name) as f:
                worker = f.read().split()
        finally:
            sys.setprofile(None)
            ex.close()
            os.close(_FD)
    for side, lines in (("host", host), ("worker", worker)):
        path = stops(lines)
        files = {s.split(":")[0] for s in path}
        print(f"{side:6s}: {len(path)} stops, {max(0, len(path) - 1)} changes of file, {len(files)} files")
        if args.show:
            print("   " + "\n   ".join(path))
    both = stops(host) + stops(worker)
    files = {s.split(":")[0] for s in both}
    print(f"total : {len(stops(host)) - 1 + len(stops(worker)) - 1} changes of file, {len(files)} files")


if __name__ == "__main__":
    main()
