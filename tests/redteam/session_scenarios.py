"""Attacks on sessions, each run in a fresh interpreter (as root, or as nobody under ``setpriv``) by
``test_session_isolation.py``; each prints one JSON line of what it saw.

    python -m tests.redteam.session_scenarios NAME WORKDIR
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from toolfork import tool
from toolfork.executor import Executor, ToolCall
from toolfork.tools.runtime import ToolRuntime


class Account:
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.balance = 0


@tool
def deposit(amount: int, runtime: ToolRuntime) -> str:
    """Add to the balance; says whose and how much.

    Args:
        amount: how much
    """
    runtime.state.balance += amount
    return f"{runtime.state.owner}:{runtime.state.balance}"


@tool
def scribble(names_file: str, runtime: ToolRuntime) -> int:
    """Into every descriptor this process holds: a well-formed result frame for each of the next calls
    of a session (seq 0-7), then junk; then read what can be read. What each one names goes to
    ``names_file`` first (its own result is forged too: it writes into its own result pipe).

    Args:
        names_file: where the list of what the descriptors name goes
    """
    from toolfork.executor.types import ToolResult
    from toolfork.executor.wire import frames
    from toolfork.tools.output import ToolOutput

    forged = [frames.frame(pickle.dumps(frames.result_frame(seq, ToolResult(
        f"d{seq}", "deposit", "ok", output=ToolOutput.text("FORGED"))))) for seq in range(8)]
    named = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            named[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
    Path(names_file).write_text(json.dumps([n for fd, n in named.items() if fd > 2]))
    for fd in named:
        if fd < 3:
            continue
        try:
            os.set_blocking(fd, False)
        except OSError:
            pass
        for data in [*forged, b"\xff\x00junk" * 64]:
            try:
                os.write(fd, data)
            except OSError:
                pass
        try:
            os.read(fd, 1 << 16)
        except OSError:
            pass
    return len(named)


@tool
def background(pid_file: str, runtime: ToolRuntime) -> str:
    """Start ``sleep 60`` in the background through a shell, its pid in ``pid_file``.

    Args:
        pid_file: where the sleep's pid goes
    """
    os.system(f"sleep 60 & echo $! > {pid_file}")
    return "started"


@tool
def signal_parent(sig: str, runtime: ToolRuntime) -> int:
    """Send ``sig`` (a signal's name) to this process's parent: a session's supervisor.

    Args:
        sig: SIGSTOP, SIGKILL...
    """
    parent = os.getppid()
    os.kill(parent, getattr(signal, sig))
    return parent


@tool
def spin(seconds: float, runtime: ToolRuntime) -> str:
    """Burn CPU for ``seconds`` (no sleep: only a signal stops it).

    Args:
        seconds: how long
    """
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return f"{runtime.state.owner}:spun"


TOOLS = [deposit, scribble, background, signal_parent, spin]


def _channels(pid: int) -> set[str]:
    """What a session's process talks to the host through: its pipes and sockets, by kernel object (not
    what this interpreter was started with, which every process of it shares)."""
    names = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if int(name) > 2 and target.startswith(("pipe:", "socket:")):
            names.add(target)
    return names - _STARTED_WITH


_STARTED_WITH: set[str] = set()
_STARTED_WITH = _channels(os.getpid())


def siblings(work: Path) -> dict[str, Any]:
    """Session A opens and runs; session B's tool writes frames and junk into everything it holds."""
    with Executor(TOOLS, mode="fork", workers=1, timeout=30) as ex:
        with ex.session(Account, "ada") as a, ex.session(Account, "bob") as b:
            first = a.run([ToolCall("d0", "deposit", {"amount": 1})])[0]
            assert a.pid is not None
            theirs = _channels(a.pid)
            attack = b.run([ToolCall("s", "scribble", {"names_file": str(work / "names.json")})])[0]
            named = json.loads((work / "names.json").read_text())
            try:
                after = [r.output.as_text() if r.output else r.status
                         for r in a.run([ToolCall(f"d{i}", "deposit", {"amount": 1}) for i in range(1, 4)])]
            except Exception as exc:
                after = [f"raised {type(exc).__name__}: {exc}"]
    return {"first": first.output.as_text() if first.output else first.status, "after": after,
            "shared": sorted(theirs & set(named)), "attack": attack.status}


def orphan(work: Path) -> dict[str, Any]:
    """A session's tool leaves ``sleep 60`` behind; then the template dies. The session's next call ends
    (the sleep must hold no channel of the session), and the later sessions open."""
    pid_file = work / "sleep.pid"
    out: dict[str, Any] = {}
    with Executor(TOOLS, mode="fork", workers=1, timeout=30) as ex:
        s = ex.session(Account, "ada")
        s.run([ToolCall("b", "background", {"pid_file": str(pid_file)})])
        sleeper = int(pid_file.read_text())
        try:
            os.kill(ex.backend.template_pid, signal.SIGKILL)  # type: ignore[attr-defined]
            end = time.monotonic() + 10  # its sessions' supervisor and processes die with it, a moment later
            while time.monotonic() < end and s.pid is not None and os.path.exists(f"/proc/{s.pid}/stat") and \
                    open(f"/proc/{s.pid}/stat").read().rsplit(")", 1)[1].split()[0] not in "ZX":
                time.sleep(0.02)
            got: list[Any] = []
            t = threading.Thread(target=lambda: got.append(_status(s, "d1")), daemon=True)
            started = time.monotonic()
            t.start()
            t.join(30)
            out["next"] = got[0] if got else "hung"
            out["seconds"] = round(time.monotonic() - started, 1)
            s.close()
            with ex.session(Account, "bob") as later:
                out["later"] = _status(later, "d2")
        finally:
            try:
                os.kill(sleeper, signal.SIGKILL)
            except OSError:
                pass
    return out


def _status(s: Any, call_id: str) -> str:
    try:
        r = s.run([ToolCall(call_id, "deposit", {"amount": 1})])[0]
    except Exception as exc:
        return f"raised {type(exc).__name__}"
    return f"{r.status}:{r.output.as_text() if r.output else r.error.message if r.error else ''}"


SCENARIOS = {"siblings": siblings, "orphan": orphan}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2]))))
