"""Open N sessions on one executor under a given limit on open files, run one call in each, close them
all; run in a fresh interpreter by ``test_session_descriptors.py`` (so the limit stays there) and by
hand to measure. Prints one JSON line.

    python -m tests.executor.many_sessions SOFT HARD|keep N [--measure]

``keep`` leaves the hard limit as it is. ``--measure`` adds the proportional memory (PSS) of every
process below this one while the sessions are open (read from /proc/PID/smaps_rollup).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

from tests.procs import descendants

BOUND_S = 60.0  # a bound on the wait for the processes to go, not a timing


def pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except OSError:
            continue
    return round(total / 1024, 1)


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def main(soft: int, hard: str, n: int, measure: bool) -> dict[str, Any]:
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if hard == "keep" else int(hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, limit))
    from tests.executor import session_tools as S
    from toolfork.executor import Executor, ToolCall

    out: dict[str, Any] = {"error": None}
    started = time.monotonic()
    with Executor(S.SESSION_TOOLS, mode="fork", workers=1, max_sessions=n) as ex:
        sessions = []
        try:
            for i in range(n):
                sessions.append(ex.session(S.Account, f"o{i}", i))
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
        out["open_s"] = round(time.monotonic() - started, 2)
        host_fds = len(os.listdir("/proc/self/fd"))
        out["opened"] = len(sessions)
        out["host_fds"] = host_fds
        results = [s.run([ToolCall(f"d{i}", "deposit", {"amount": 1})])[0] for i, s in enumerate(sessions)]
        out["own"] = sum(1 for i, r in enumerate(results) if r.status == "ok" and r.output is not None
                         and r.output.data == i + 1)
        out["pids"] = len({s.pid for s in sessions})
        out["supervisors"] = len({_parent(s.pid) for s in sessions if s.pid is not None})
        out["batch"] = ex.run([ToolCall("plain", "where", {})])[0].status  # the host has room for its work
        if out["error"] is not None and sessions:  # a closed session makes room for the next
            sessions.pop().close()
            with ex.session(S.Account, "again", 41) as again:
                out["again"] = again.run([ToolCall("a", "deposit", {"amount": 1})])[0].output.data
        below = descendants()
        if measure:
            out["pss_mb"] = pss_mb(below)
        out["processes"] = len(below)
        out["calls_s"] = round(time.monotonic() - started - out["open_s"], 2)
        for s in sessions:
            s.close()
    end = time.monotonic() + BOUND_S
    while [p for p in below if os.path.exists(f"/proc/{p}")] and time.monotonic() < end:
        time.sleep(0.05)
    out["left"] = [p for p in below if os.path.exists(f"/proc/{p}")]
    out["total_s"] = round(time.monotonic() - started, 2)
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), "--measure" in sys.argv)))
