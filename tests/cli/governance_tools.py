"""Tools the tests of the resource-governance options load (``tests/cli/governance_tools.py``): each
makes one limit matter on purpose, and says when it ran so the tests can check caps and rates from
the calls' own timestamps (``time.monotonic()``: one clock for every process on the machine)."""

from __future__ import annotations

import os
import time

from tests.cli.cli_tools import echo
from toolfork import tool


@tool
def hog(mb: int = 2048) -> int:
    """Allocate ``mb`` MiB at once, as a tool that reads a huge file into memory does.

    Args:
        mb: how much to allocate, in MiB
    """
    return len(bytearray(mb * 1024 * 1024))


_KEPT: list[bytearray] = []  # memory a call leaves in its worker (``keep_mb``)


def _timed(seconds: float = 0.0, keep_mb: int = 0) -> dict[str, float]:
    """Sleep, and say when the call started and ended.

    Args:
        seconds: how long to sleep
        keep_mb: MiB of memory to write and leave in the worker (its own memory grows by that much)
    """
    _KEPT.append(bytearray(b"\x01" * (keep_mb << 20)))
    start = time.monotonic()
    time.sleep(seconds)
    return {"start": start, "end": time.monotonic(), "pid": os.getpid()}


slow = tool(name="slow")(_timed)
# The same in the concurrency group "db" (whose cap the command line gives).
query = tool(name="query", concurrency_group="db")(_timed)


TOOLS = [echo, hog, slow]
# ``query`` needs a cap for its group (--concurrency db=N), so it is loaded only by the tests that give one.
GROUPED = [echo, query]
