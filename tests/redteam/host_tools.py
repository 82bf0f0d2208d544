"""Tools for the red-team tests of the host side of ``toolfork run`` and ``toolfork worker``
(importable by spec: ``tests/redteam/host_tools.py:TOOLS``, and by forked workers)."""

from __future__ import annotations

import os
import time

from toolfork import tool


@tool
def stuck(marker: str) -> str:
    """Block until stopped; write ``marker`` from the finally block (proof that the deadline held);
    ``marker.started`` once running.

    Args:
        marker: a path written when the call is stopped
    """
    with open(f"{marker}.started", "w"):
        pass
    try:
        while True:
            time.sleep(0.05)
    finally:
        part = f"{marker}.part"
        with open(part, "w") as f:
            f.write("stopped")
        os.replace(part, marker)


@tool
def blob(n: int, delay: float = 0.0) -> str:
    """Return ``n`` bytes of text, after ``delay`` seconds.

    Args:
        n: how many
        delay: seconds to wait first
    """
    time.sleep(delay)
    return "x" * n


@tool
def nap(seconds: float) -> float:
    """Sleep, then return the seconds slept.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return seconds


TOOLS = [stuck, blob, nap]
