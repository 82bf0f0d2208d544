"""Tools the metrics tests run: quick ones, ones that wait for the test's word, and ones that fail."""

from __future__ import annotations

import os
import time
from pathlib import Path

from toolfork.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def hold(gate: str) -> str:
    """Run until the file ``gate`` exists (at most 60 s): busy for as long as the test wants."""
    deadline = time.monotonic() + 60
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return "released"


@tool
def die() -> None:
    """The worker dies mid-call."""
    os._exit(3)


@tool
def hang() -> None:
    """Never returns by itself (killed at its timeout)."""
    time.sleep(600)


@tool
def fail() -> None:
    """Raises: an "error" result."""
    raise ValueError("no")


@tool(retries=2)
def die_thrice() -> None:
    """Dies on every attempt: retried twice, one "crashed" result."""
    os._exit(4)


TOOLS = [add, hold, die, hang, fail, die_thrice]
