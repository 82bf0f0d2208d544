"""Attacks on the code interpreter and smolagents' ToolforkExecutor, each run in a fresh interpreter (as
root, or as nobody under ``setpriv``) by ``test_interpreter_escapes.py``; each prints one JSON line of
what it saw.

    python -m tests.redteam.interpreter_scenarios NAME WORKDIR
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolfork.executor import Executor
from toolfork.toolkits import PythonInterpreter


def pickled_final_answer(work: Path) -> dict[str, Any]:
    """A code action raises smolagents' final-answer exception carrying a pickle whose loading would run
    a command in the host: the host must never unpickle what the sandbox sends."""
    from rich.console import Console
    from smolagents.monitoring import AgentLogger, LogLevel

    from toolfork.adapters.smolagents import ToolforkExecutor

    marker = work / "unpickled-in-the-host"
    ex = ToolforkExecutor([], AgentLogger(LogLevel.OFF, Console(file=io.StringIO())), timeout=30)
    try:
        code = ("import base64, os, pickle\n"
                "class Boom:\n"
                f"    def __reduce__(self):\n        return (os.system, ('touch {marker}',))\n"
                "class FinalAnswerException(BaseException):\n    pass\n"
                "raise FinalAnswerException('pickle:' + base64.b64encode(pickle.dumps(Boom())).decode())")
        try:
            out = ex(code)
            raised = f"none: {out!r}"
        except Exception as exc:
            raised = type(exc).__name__
    finally:
        ex.cleanup()
    return {"raised": raised, "marker": marker.exists()}


def neighbour_files(work: Path) -> dict[str, Any]:
    """Episode B reads, lists and overwrites episode A's workspace (its path is no secret)."""
    interp = PythonInterpreter(timeout=30, memory_mb=None)  # nobody gets no cgroup here: memory_mb is refused
    with Executor(interp, workers=1) as ex, interp.open(ex) as a, interp.open(ex) as b:
        a.run_cell("open('secret.txt', 'w').write('a-only')")
        theirs = os.path.join(a.workspace, "secret.txt")
        tries = [f"open({theirs!r}).read()", f"__import__('os').listdir({a.workspace!r})",
                 f"open({theirs!r}, 'w').write('b')", f"__import__('os').chmod({theirs!r}, 0o777)"]
        seen = [b.run_cell(code).output.data for code in tries]
        after = a.run_cell("open('secret.txt').read()").output.data["value"]
    return {"leaked": any("a-only" in str(s["value"]) for s in seen),
            "refused": [s["error"] is not None for s in seen], "after": after}


def kill_the_checkpoint(work: Path) -> dict[str, Any]:
    """A cell kills every other process it can see (its checkpoint among them), then crashes: the episode
    must end saying so, never go on with a fresh interpreter."""
    from toolfork.executor.sessions.session import SessionLost

    interp = PythonInterpreter(timeout=30, memory_mb=None)
    with Executor(interp, workers=1) as ex, interp.open(ex) as s:
        s.run_cell("x = 1")
        r = s.run_cell("import os, signal\nfor p in os.listdir('/proc'):\n"
                       "    if p.isdigit() and int(p) != os.getpid():\n"
                       "        try:\n            os.kill(int(p), signal.SIGKILL)\n        except OSError:\n"
                       "            pass\nos._exit(1)")
        try:
            nxt = s.run_cell("x")
            after = f"ran: {nxt.status} {nxt.output.data if nxt.output else nxt.error}"
        except SessionLost as lost:
            after = f"SessionLost at {lost.call_id}"
    return {"status": r.status, "said": "the interpreter is lost" in (r.error.message if r.error else ""),
            "after": after, "message": r.error.message if r.error else None}


SCENARIOS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "pickled_final_answer": pickled_final_answer,
    "neighbour_files": neighbour_files,
    "kill_the_checkpoint": kill_the_checkpoint,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2]))))
