"""Tools and hooks the CLI tests load by spec (``tests/cli/cli_tools.py:TOOLS`` or
``tests.cli.cli_tools:...``), each built to make one outcome of a call happen on purpose."""

from __future__ import annotations

import os
import time
from pathlib import Path

from toolfork import ToolOutput, tool

_HOOK_CALLS = {"before": 0}


@tool
def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: what to return
    """
    return text


@tool
def boom(message: str = "boom") -> str:
    """Raise, as a broken tool does.

    Args:
        message: the exception's message
    """
    raise RuntimeError(message)


@tool
def soft_fail(reason: str) -> ToolOutput:
    """Return an error output without raising (the tool reports a failure it handled).

    Args:
        reason: the message the model would see
    """
    return ToolOutput.error(reason)


@tool
def nap(seconds: float, tag: str = "") -> str:
    """Sleep, then say so.

    Args:
        seconds: how long to sleep
        tag: echoed back, to tell calls apart
    """
    time.sleep(seconds)
    return f"slept {seconds} {tag}".strip()


@tool
def blob(size: int) -> str:
    """A string of ``size`` characters: a big output on demand.

    Args:
        size: number of characters
    """
    return "x" * size


@tool
def hook_count() -> dict[str, int]:
    """How often the before_child hook has run in this worker, and where we are."""
    return {"before": _HOOK_CALLS["before"], "pid": os.getpid()}


@tool
def stamp(seconds: float = 0.0, marker: str = "") -> dict[str, float]:
    """Say when the call started and ended (``time.monotonic()``: one clock for every process on the
    machine), so a test can order events across workers without timing anything.

    Args:
        seconds: how long to sleep between the two stamps
        marker: a file created once the call has started, for a test to wait on
    """
    start = time.monotonic()
    if marker:
        Path(marker).write_text(str(os.getpid()))
    time.sleep(seconds)
    return {"start": start, "end": time.monotonic()}


def count_before() -> None:
    _HOOK_CALLS["before"] += 1


def failing_after() -> None:
    raise RuntimeError("after hook broke")


NOT_CALLABLE = 42
NOT_A_TOOL = [echo, "nope"]

TOOLS = [echo, boom, soft_fail, nap, blob, hook_count]


@tool
def chatty(text: str) -> str:
    """Print to stdout (both through Python and straight to descriptor 1), as careless tools and
    libraries do, then return ``text``.

    Args:
        text: what to return
    """
    import os

    print("chatter from print()", flush=True)
    os.write(1, b"chatter on fd 1\n")
    return text


@tool
def mark(path: str, tag: str, seconds: float = 0.0) -> str:
    """Append ``tag`` to the file at ``path`` (one line, O_APPEND), then sleep: a test counts the lines
    to learn how often each call really ran.

    Args:
        path: the tally file
        tag: the line to append
        seconds: how long to sleep after
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{tag}\n".encode())
    finally:
        os.close(fd)
    time.sleep(seconds)
    return tag


@tool
def die(code: int = 3) -> str:
    """End the worker process at once, as a tool that calls ``os._exit`` (or segfaults) does.

    Args:
        code: the exit code
    """
    os._exit(code)


@tool(inline=True)
def echo_here(text: str) -> str:
    """``echo`` run in the host (inline): a job with it takes the general path.

    Args:
        text: what to return
    """
    return text


# The line lane's tests (``test_run_lane.py``) load these.
LANE_TOOLS = [echo, boom, soft_fail, nap, mark, die]
