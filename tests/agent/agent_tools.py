"""Tools the agent tests run. Module-level so fork-mode workers have them (they are forked)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from toolfork import ToolOutput, tool

# 1x1 red PNG.
PNG_BYTES = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a5d6a0a30000000049454e44ae426082"
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


@tool
def sleepy(label: str, seconds: float, log: str) -> dict[str, object]:
    """Sleep, then note the label in a log file (one line per finished call).

    Args:
        label: what to write
        seconds: how long to sleep
        log: path of the log file
    """
    time.sleep(seconds)
    with open(log, "a") as fh:
        fh.write(label + "\n")
    return {"label": label, "pid": os.getpid()}


@tool(on_error="fail-run")
def boom(message: str) -> str:
    """Always raises.

    Args:
        message: the error message
    """
    raise ValueError(message)


@tool(on_error="return-to-model")
def soft_boom(message: str) -> str:
    """Always raises, but its errors go back to the model.

    Args:
        message: the error message
    """
    raise ValueError(message)


@tool(timeout=0.5, on_error="fail-run")
def hang(seconds: float) -> str:
    """Sleeps longer than its timeout.

    Args:
        seconds: how long to sleep
    """
    time.sleep(seconds)
    return "woke up"


@tool(on_error="fail-run")
def die(code: int) -> str:
    """Kills its own process.

    Args:
        code: exit code
    """
    os._exit(code)


@tool
def picture() -> ToolOutput:
    """Returns a tiny PNG."""
    return ToolOutput(content=[*ToolOutput.text("a red pixel").content, *ToolOutput.image(PNG_BYTES).content])


@tool
def big(n: int) -> str:
    """Returns a long text whose start and end are marked.

    Args:
        n: number of filler characters
    """
    return "HEAD-" + "x" * n + "-TAIL"


@tool
def record_pid(path: str) -> int:
    """Appends this process's pid to a file.

    Args:
        path: the file
    """
    Path(path).open("a").write(f"{os.getpid()}\n")
    return os.getpid()


def _needs_approval(inputs: dict[str, object]) -> bool | str:
    amount = inputs["amount"]
    assert isinstance(amount, int)
    return f"moves {amount}, more than 100" if amount > 100 else False


@tool(approval_policy=_needs_approval)
def transfer(amount: int, log: str) -> str:
    """Moves money (logs the transfer to a file).

    Args:
        amount: how much
        log: path of the log file
    """
    with open(log, "a") as fh:
        fh.write(f"{amount}\n")
    return f"sent {amount}"
