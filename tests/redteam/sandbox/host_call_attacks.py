"""Attacks on a sandboxed session's host tools, run in a fresh interpreter as root or as nobody:
``python -m tests.redteam.sandbox.host_call_attacks NAME WORKDIR`` prints one JSON line of what it saw.

The session is opened with ``Limits(network=False, write_paths=[WORKDIR/ws])`` reading only its workspace and
the interpreter's files, and ``host_tools=["reach"]``;
the Executor also has ``mark``, a tool whose effect (a file) proves it ran. A cell runs unrestricted
Python with ``call_host`` (its call's ``runtime.call_host``) and the worker's own frame writer in reach."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tests.executor.session_tools import mark
from tests.redteam.sandbox.session_attacks import interpreter_reads, workspaces
from toolfork import Limits, ToolRuntime, tool
from toolfork.executor import Executor, ToolCall


@tool
def reach(path: str) -> str:
    """A host tool the session may ask for: it reads what the sandbox cannot.

    Args:
        path: a file in the host
    """
    return Path(path).read_text()


@tool
def host_cell(code: str, runtime: ToolRuntime) -> Any:
    """Run Python with ``call_host`` and the worker's frame writer (``writer``) in reach; ``out`` is the result.

    Args:
        code: Python source
    """
    from toolfork.executor.wire.framing import FrameWriter

    space = runtime.state
    space.pop("out", None)
    space["call_host"] = runtime.call_host
    space["writer"] = next(o for o in gc.get_objects() if type(o) is FrameWriter)
    space["seq"] = runtime._seq  # type: ignore[attr-defined]  # the running call's place (an attacker reads it)
    exec(code, space)  # the point: unrestricted code, contained by the sandbox and the host alone
    return space.get("out")


def _run(s: Any, code: str, timeout: float = 20) -> dict[str, Any]:
    if s.lost is not None:
        return {"status": "lost", "data": None, "error": str(s.lost)}
    r = s.run([ToolCall(f"c{time.monotonic_ns()}", "host_cell", {"code": code}, timeout=timeout)])[0]
    data = None if r.output is None else r.output.data if r.output.data is not None else r.output.as_text()
    error = None if r.error is None else f"{r.error.type}: {r.error.message}"
    return {"status": r.status, "data": data, "error": error}


def host_calls(ex: Executor, work: Path) -> dict[str, Any]:
    """The session reads a host file only through ``reach``; ``mark`` never runs, whether asked for
    through ``call_host``, by a forged frame for the running call, or by one for a call to come."""
    [ws] = workspaces(work, "ws")
    secret = work / "host_only.txt"
    secret.write_text("the host's file")
    marks = [work / f"marked_{i}" for i in range(3)]
    seen: dict[str, Any] = {}
    reads = [*interpreter_reads(), str(ws)]
    limits = Limits(network=False, read_paths=reads, write_paths=[str(ws)])
    with ex.session(dict, limits=limits, host_tools=["reach"], checkpoint=True) as s:
        seen["direct_read"] = _run(s, f"out = open({str(secret)!r}).read()")
        seen["through_reach"] = _run(s, f"out = call_host('reach', path={str(secret)!r})")
        seen["ask_mark"] = _run(s, f"try:\n    call_host('mark', path={str(marks[0])!r})\n    out = 'asked'\n"
                                   "except Exception as exc:\n    out = f'{type(exc).__name__}: {exc}'")
        seen["forged_now"] = _run(s, f"writer.send(('h', seq, 'mark', {{'path': {str(marks[1])!r}}}))\nout = 'sent'")
        seen["after_forged_now"] = _run(s, "out = 'still here'")
        seen["forged_later"] = _run(s, f"writer.send(('h', seq + 3, 'mark', {{'path': {str(marks[2])!r}}}))\n"
                                       "out = 'sent'")
        seen["after_forged_later"] = _run(s, f"out = call_host('reach', path={str(secret)!r})")
    seen["marks"] = [m.exists() for m in marks]
    return seen


SCENARIOS = {"host_calls": host_calls}


def main() -> None:
    name, work = sys.argv[1], Path(sys.argv[2])
    with Executor([reach, mark, host_cell], mode="fork", workers=1, timeout=60) as ex:
        seen = SCENARIOS[name](ex, work)
    print(json.dumps(seen, default=str))


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, lambda *_: os._exit(9))
    signal.alarm(150)
    main()
