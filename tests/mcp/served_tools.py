"""Tools ``toolfork mcp serve`` serves in the tests: each shows one thing the server must survive or
carry (progress, a crash, ``os._exit``, a hang past the timeout, CPU-bound work, metadata)."""

from __future__ import annotations

import ctypes
import os
import time

from pydantic import BaseModel

from toolfork.tools import ToolRuntime, tool


class Total(BaseModel):
    total: int


@tool
def add(a: int, b: int) -> Total:
    """Add two integers."""
    return Total(total=a + b)


add.output_model = Total
add.title = "Add"  # type: ignore[attr-defined]
add.annotations = {"readOnlyHint": True, "idempotentHint": True}  # type: ignore[attr-defined]


@tool
def count(n: int, runtime: ToolRuntime) -> str:
    """Report n progress steps, then say done."""
    for i in range(n):
        runtime.emit_progress({"progress": i + 1, "total": n, "message": f"step {i + 1}"})
        time.sleep(0.05)
    return "done"


@tool
def burst(n: int, runtime: ToolRuntime) -> str:
    """Report n progress steps back to back and return at once: the result follows the last one."""
    for i in range(n):
        runtime.emit_progress(i + 1)
    return f"burst {n}"


def _mark(marker: str) -> None:
    """Write this worker's pid to ``marker`` (whole, by a rename) when one is given."""
    if marker:
        with open(marker + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(marker + ".tmp", marker)


WORD = {"type": "object", "properties": {"word": {"type": "string"}}}


@tool(timeout=3)
def ask_user(runtime: ToolRuntime, marker: str = "") -> str:
    """Ask the client's user for a word (elicitation), within the call's 3 s; writes its pid to
    ``marker`` first."""
    _mark(marker)
    answer = runtime.elicit("a word?", WORD)
    return f"{answer['action']}:{(answer.get('content') or {}).get('word')}"


@tool(timeout=30)
def interview(log: str, runtime: ToolRuntime) -> str:
    """Ask the user for a word, then the client's model for a rhyme: two questions in one run of the
    body (each run appends a line to ``log``), with progress and a log message on the way."""
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\n")
    runtime.emit_progress(1)
    answer = runtime.elicit("a word?", WORD)
    word = (answer.get("content") or {}).get("word")
    runtime.log("info", f"got {word}")
    runtime.emit_progress(2)
    reply = runtime.sample(f"a rhyme for {word}", max_tokens=20, system_prompt="rhymes only")
    runtime.emit_progress(3)
    return f"{answer['action']}:{word}:{reply['content']['text']}:{reply['model']}:{os.getpid()}"


@tool
def say(runtime: ToolRuntime) -> str:
    """Log once at each of debug, info and warning."""
    for level in ("debug", "info", "warning"):
        runtime.log(level, f"at {level}")
    return "said"


@tool
def refuse() -> str:
    """Answer with a protocol error: the client lacks a capability this tool needs."""
    from toolfork.mcp import MCPProtocolError

    raise MCPProtocolError(-32003, "needs sampling", {"requiredCapabilities": {"sampling": {}}})


@tool(timeout=120)  # CPU time on a loaded machine: the module's short default would cut it off
def spin(seconds: float) -> dict[str, float]:
    """Burn ``seconds`` of CPU time (not wall time: on a loaded machine the wall time is longer);
    returns the worker's pid and when (wall clock) the work started and ended."""
    start = time.time()
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return {"pid": os.getpid(), "start": start, "end": time.time()}


@tool
def snooze(seconds: float) -> str:
    """Sleep (an I/O-bound tool)."""
    time.sleep(seconds)
    return "ok"


@tool
def crash() -> str:
    """Segfault the worker."""
    ctypes.string_at(0)
    return "unreachable"


@tool
def exit_now() -> str:
    """End the worker with os._exit."""
    os._exit(7)


@tool
def hang(marker: str = "") -> str:
    """Sleep far past any timeout; writes its pid to ``marker`` first."""
    _mark(marker)
    time.sleep(600)
    return "woke"


@tool
def chatty() -> str:
    """Print to stdout and read stdin, as careless tools do: neither may touch the MCP stream."""
    print("noise on stdout", flush=True)
    os.write(1, b"raw noise on fd 1\n")
    return f"read {os.read(0, 100)!r}"  # the wire would block here, or hand over the next request


@tool(timeout=60)
def block(marker: str) -> str:
    """``hang`` with a long timeout of its own: only a cancellation stops it soon."""
    return str(hang.invoke({"marker": marker}).as_text())


@tool
def fail(message: str) -> str:
    """Raise ValueError(message)."""
    raise ValueError(message)


TOOLS = [add, count, burst, ask_user, interview, say, refuse, spin, snooze, crash, exit_now, hang, block, chatty, fail]
