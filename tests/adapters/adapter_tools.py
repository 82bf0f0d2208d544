"""Tools the adapter tests run: module-level, so forked workers (and dill) find them by import."""

from __future__ import annotations

import os
import time

from toolfork import tool


@tool
def where(tag: str) -> dict[str, object]:
    """Say which process ran the call.

    Args:
        tag: echoed back, to tell the calls apart
    """
    return {"tag": tag, "pid": os.getpid()}


@tool
def nap(seconds: float) -> str:
    """Sleep; say which process slept and when (``"pid start end"``, wall-clock seconds).

    Args:
        seconds: how long to sleep
    """
    start = time.time()
    time.sleep(seconds)
    return f"{os.getpid()} {start:.4f} {time.time():.4f}"


def naps(texts: list[str]) -> tuple[set[int], bool]:
    """The pids that ran ``nap`` calls, and whether all of those calls were asleep at one moment."""
    rows = [t.split() for t in texts]
    pids = {int(r[0]) for r in rows}
    return pids, max(float(r[1]) for r in rows) < min(float(r[2]) for r in rows)


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


@tool
def crash() -> str:
    """Kill the process that runs the call (as a segfault would)."""
    os._exit(3)


@tool(timeout=1.0)
def hang() -> str:
    """Never return (a stuck C call, a deadlock): only its timeout ends it."""
    while True:
        time.sleep(60)


@tool
def boom() -> str:
    """Raise an ordinary exception."""
    raise ValueError("boom from the tool")


ALL = [where, nap, add, crash, hang, boom]
