"""The functions every executor runs in the benchmark.

They are plain module-level functions so that every peer can ship them to a worker by reference
(pickle, dill, cloudpickle and Ray all resolve ``toolfork.bench.calls.<name>`` in the worker), and
this module imports nothing heavy so that spawn-style workers (loky, Ray) start quickly. toolfork gets
the very same functions wrapped with ``@tool`` by :func:`toolfork_tools`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from toolfork.bench.payload_calls import FUNCTIONS as PAYLOAD_FUNCTIONS
from toolfork.bench.user_calls import user_call


def sleep_call(seconds: float) -> str:
    """Wait like an I/O-bound tool (an HTTP request, a database query).

    Args:
        seconds: how long to sleep
    """
    time.sleep(seconds)
    return "slept"


def cpu_call(iterations: int) -> int:
    """Burn CPU in pure Python, holding the GIL, like a parsing or scoring tool.

    Args:
        iterations: loop length; the harness calibrates it to a target duration
    """
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def trivial_call(x: int) -> int:
    """Do nothing measurable, so that only the executor's own cost is timed.

    Args:
        x: a number to echo back plus one
    """
    return x + 1


def pid_call() -> int:
    """Do nothing measurable but say which process ran the call (the fresh workload checks that
    each fresh call had a process of its own)."""
    return os.getpid()


def stamp_call(seconds: float) -> float:
    """Sleep, then say when the call finished (``time.monotonic()`` is system-wide on Linux).

    Args:
        seconds: how long to sleep first (0 for a quick call)
    """
    if seconds > 0:
        time.sleep(seconds)
    return time.monotonic()


def span_call(seconds: float) -> list[float]:
    """Sleep like an I/O-bound tool and say when the call ran: ``[start, end]`` in
    ``time.monotonic()`` (system-wide on Linux), so that the harness can tell which calls overlapped.

    Args:
        seconds: how long to sleep
    """
    start = time.monotonic()
    time.sleep(seconds)
    return [start, time.monotonic()]


def payload_call(nbytes: int) -> str:
    """Return a large result, to time how results cross the process boundary.

    Args:
        nbytes: length of the returned string
    """
    return "x" * nbytes


def hang_call(marker_dir: str) -> str:
    """Never return, like a tool stuck on a dead socket.

    It leaves a marker file named ``<pid>-<thread id>`` so the harness can tell afterwards whether
    the stuck call is still running somewhere (a process or a thread left behind).

    Args:
        marker_dir: directory where the marker file goes
    """
    path = os.path.join(marker_dir, f"{os.getpid()}-{threading.get_ident()}")
    with open(path, "w") as fh:
        fh.write(str(time.time()))
    while True:
        time.sleep(3600)


def crash_call(delay: float, code: int) -> str:
    """Kill the process that runs it without cleanup, like a segfaulting C extension.

    Args:
        delay: seconds to wait first, so that the other calls of the batch are in flight
        code: exit code passed to os._exit
    """
    time.sleep(delay)
    os._exit(code)


def memory_call(hold: float) -> dict[str, Any]:
    """Report the memory of the process that runs the call (unique set size and RSS).

    Args:
        hold: seconds to sleep first, so that each worker of the pool takes one call
    """
    import psutil

    time.sleep(hold)
    info = psutil.Process().memory_full_info()
    return {"pid": os.getpid(), "uss": int(info.uss), "rss": int(info.rss)}


FUNCTIONS: dict[str, Callable[..., Any]] = {
    fn.__name__: fn
    for fn in (
        sleep_call,
        cpu_call,
        trivial_call,
        pid_call,
        stamp_call,
        span_call,
        payload_call,
        hang_call,
        crash_call,
        memory_call,
        user_call,
    )
}
FUNCTIONS.update(PAYLOAD_FUNCTIONS)

# Tools only toolfork has (a process per call is a setting of a toolfork tool): the same function, each
# call in a process of its own (``@tool(fresh_process=True)``), named with this suffix (fresh workload).
FRESH_SUFFIX = "_fresh"
FRESH_FUNCTIONS: tuple[str, ...] = ("pid_call",)

_TOOLS: list[Any] | None = None


def toolfork_tools() -> list[Any]:
    """The same functions as toolfork tools (built once per process, names as in FUNCTIONS), plus
    ``<name>_fresh`` with ``fresh_process=True`` for the functions of FRESH_FUNCTIONS."""
    global _TOOLS
    if _TOOLS is None:
        from toolfork.tools import tool

        _TOOLS = [tool(fn) for fn in FUNCTIONS.values()] + [
            tool(name=name + FRESH_SUFFIX, fresh_process=True)(FUNCTIONS[name]) for name in FRESH_FUNCTIONS
        ]
    return _TOOLS


def calibrate_cpu(target_s: float, rounds: int = 3) -> int:
    """Find the cpu_call iteration count that takes about ``target_s`` here, now."""
    n = 20_000
    while True:
        t0 = time.perf_counter()
        cpu_call(n)
        dt = time.perf_counter() - t0
        if dt >= 0.02:
            break
        n *= 2
    iterations = max(1, int(n * target_s / dt))
    # One refinement pass: the first estimate is skewed by warm-up.
    return max(1, int(iterations * target_s / time_cpu_call(iterations, rounds)))


def time_cpu_call(iterations: int, rounds: int = 3) -> float:
    """Median in-process duration of one cpu_call: the unit of the cpu workload's ideal."""
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        cpu_call(iterations)
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2]
