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
import time
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


def next_agent_ahead(work: Path) -> dict[str, Any]:
    """On a shared Executor, agent A's code plants a file in the workspace opened ahead for the next agent
    and reads it (its path is no secret); the next agent B, handed that session, reads A's files."""
    import tempfile

    from rich.console import Console
    from smolagents.monitoring import AgentLogger, LogLevel
    from smolagents.utils import AgentError

    from toolfork.adapters.smolagents import ToolforkExecutor

    def tried(ex: ToolforkExecutor, code: str) -> str:
        try:
            return f"ran: {ex(code).output!r}"
        except AgentError:
            return "refused"

    tempfile.tempdir = str(work / "ws")
    os.mkdir(tempfile.tempdir)
    logger = AgentLogger(LogLevel.OFF, Console(file=io.StringIO()))
    with Executor([], workers=1) as shared:
        a = ToolforkExecutor([], logger, timeout=30, executor=shared)
        b = None
        try:
            a("open('secret.txt', 'w').write('a-only')")
            ahead = [os.path.join(tempfile.tempdir, d) for d in os.listdir(tempfile.tempdir)
                     if d != os.path.basename(a.workspace)]
            planted = os.path.join(ahead[0], "planted.txt")
            by_a = [tried(a, f"open({planted!r}, 'w').write('a')"), tried(a, f"__import__('os').listdir({ahead[0]!r})")]
            b = ToolforkExecutor([], logger, timeout=30, executor=shared)
            theirs = os.path.join(a.workspace, "secret.txt")
            by_b = [tried(b, f"open({theirs!r}).read()"), tried(b, f"__import__('os').listdir({a.workspace!r})"),
                    tried(b, f"open({theirs!r}, 'w').write('b')")]
            mine = b("import os\nsorted(os.listdir('.')), 'secret' in globals()").output
            handed = b.workspace == ahead[0]
        finally:
            a.cleanup()
            if b is not None:
                b.cleanup()
    return {"ahead": len(ahead), "handed": handed, "by_a": by_a, "planted": os.path.exists(planted),
            "by_b": by_b, "mine": mine, "left": os.listdir(tempfile.tempdir)}


def reserve_copies(work: Path) -> dict[str, Any]:
    """Cells that change the state and then run past their timeout, twice in a row (the second after
    killing the copy its checkpoint forked of itself, its reserve): each must be rolled back to the state
    before it, never to a later one, and no old copy (nor a zombie) may stay in the sandbox."""
    interp = PythonInterpreter(timeout=30, memory_mb=None)
    procs = ("import os\nsorted(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0]\n"
             "       for p in os.listdir('/proc') if p.isdigit())")
    reserve = ("import os, signal, time\ntime.sleep(0.5)\n"  # (its checkpoint forks its reserve meanwhile)
               "def ppid(p):\n    return open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1]\n"
               "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
               "mine = [p for p in pids if ppid(p) == str(os.getpid())]\n"
               "copies = [p for p in pids if ppid(p) in mine]\n"
               "for p in copies:\n    os.kill(int(p), signal.SIGKILL)\n"
               "open('killed.txt', 'w').write(str(len(copies)))\n")
    with Executor(interp, workers=1) as ex, interp.open(ex) as s:
        s.run_cell("x = 1")
        first = s.run_cell("x = 'later'\nwhile True:\n    pass", timeout=0.5)
        second = s.run_cell(f"x = 'later too'\n{reserve}while True:\n    pass", timeout=2.0)
        after = s.run_cell("x").output.data["value"]
        time.sleep(0.3)
        s.run_cell("y = 2")
        time.sleep(0.3)
        states = s.run_cell(procs).output.data["value"]
        killed = open(os.path.join(s.workspace, "killed.txt")).read()
    rolled = [r.error is not None and "rolled back" in r.error.message for r in (first, second)]
    return {"killed": killed, "first": first.status, "second": second.status, "rolled": rolled,
            "after": after, "states": states}


SCENARIOS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "reserve_copies": reserve_copies,
    "next_agent_ahead": next_agent_ahead,
    "pickled_final_answer": pickled_final_answer,
    "neighbour_files": neighbour_files,
    "kill_the_checkpoint": kill_the_checkpoint,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2]))))
