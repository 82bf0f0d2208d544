"""Tools for the agent-semantics tests (issue 12 §2). Module-level so fork-mode workers have them."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Generator
from pathlib import Path

from toolfork import ToolRuntime, tool


@tool
def whoami(runtime: ToolRuntime, note: str) -> dict[str, object]:
    """Report what the runtime says about this call.

    Args:
        note: any text
    """
    call = runtime.tool_call
    return {"run_id": runtime.run_id, "agent_id": runtime.agent_id, "step_index": runtime.step_index,
            "call": None if call is None else [call.id, call.name, call.arguments],
            "context": sorted(runtime.context), "pid": os.getpid()}


@tool
def countdown(n: int) -> Generator[str, None, str]:
    """Count down, reporting each step as progress; the result is the return value.

    Args:
        n: where to start
    """
    for i in range(n, 0, -1):
        yield f"{i} left"
    return f"lift-off after {n}"


@tool
async def stages(n: int) -> AsyncIterator[dict[str, int]]:
    """Go through stages; each is progress, the last one is the result too.

    Args:
        n: how many stages
    """
    for i in range(n):
        await asyncio.sleep(0)
        yield {"stage": i, "pid": os.getpid()}


@tool
def escalate(runtime: ToolRuntime, level: int) -> str:
    """Ask for a stronger model, colder and terser, forced to call `add` next.

    Args:
        level: escalation level
    """
    runtime.set_next_turn_params(model="bigger-model", temperature=0.25, tool_choice="add",
                                 instructions="Answer in one word.")
    return f"escalated to {level}"


@tool(timeout=0.1)
def slow_write(path: str) -> str:
    """Sleep past the timeout, then write a file: a side effect that really happens.

    Args:
        path: the file to write
    """
    time.sleep(0.4)
    Path(path).write_text("written")
    return "wrote the file"
