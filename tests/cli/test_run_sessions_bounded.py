"""``toolfork run --session-factory`` keeps at most the executor's ``max_sessions`` (``--workers`` x 8)
session processes, whatever the input: later keys wait for a place, and a key that could only open by
passing the bound gets ``TooManySessions`` records instead of the job waiting for ever."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, child_env, read_jsonl

TOOLS = '''
import os
from toolfork import ToolRuntime, tool


class Tally:
    def __init__(self, owner):
        self.owner, self.total = owner, 0


@tool
def census(amount: int, runtime: ToolRuntime) -> list:
    """Add to the tally; say how many session processes that ran a call are alive now.

    Args:
        amount: how much
    """
    runtime.state.total += amount
    pids = os.path.join(os.path.dirname(__file__), "pids")
    with open(pids, "a") as f:
        f.write(f"{os.getpid()}\\n")
    with open(pids) as f:
        seen = {int(p) for p in f.read().split()}
    return [f"{runtime.state.owner}:{runtime.state.total}", sum(1 for p in seen if _alive(p))]


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


TOOLS = [census]
'''
KEYS = 60
PLACES = 16  # --workers 2, x 8


def run(where: Path, rows: list[dict[str, Any]], *extra: str) -> list[dict[str, Any]]:
    """The job on ``rows`` through a pipe that stays open until the first ``PLACES`` records are out (its
    sessions end only at the end of the input: until then every key that opened holds its process)."""
    (where / "tally.py").write_text(TOOLS)
    out = where / "out.jsonl"
    args = ["-", "-o", str(out), "--tools", f"{where}/tally.py:TOOLS", "--workers", "2", "-q",
            "--session-factory", f"{where}/tally.py:Tally", *extra]
    with subprocess.Popen([sys.executable, "-m", "toolfork.cli", "run", *args], stdin=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=REPO, env=child_env()) as job:
        assert job.stdin is not None and job.stderr is not None
        try:
            job.stdin.write("".join(json.dumps(r) + "\n" for r in rows).encode())
            job.stdin.flush()
            end = time.monotonic() + 120
            while time.monotonic() < end and job.poll() is None and (
                    not out.exists() or len(out.read_bytes().splitlines()) < PLACES):
                time.sleep(0.05)
            time.sleep(1.0)  # what else would open, opens
        finally:
            job.stdin.close()
        code = job.wait(240)
        assert code in (0, 1), job.stderr.read().decode()
    return read_jsonl(out)


def line(key: int, turn: int) -> dict[str, Any]:
    return {"id": f"k{key}-{turn}", "name": "census", "arguments": {"amount": 1}, "session": f"k{key}",
            "session_args": [f"k{key}"]}


@pytest.mark.timeout(320)
@pytest.mark.parametrize("order", ["by key", "interleaved", "interleaved, window 4"])
def test_session_processes_stay_within_the_bound_whatever_the_input(tmp_path: Path, order: str) -> None:
    rows = ([line(k, t) for k in range(KEYS) for t in (1, 2)] if order == "by key"
            else [line(k, t) for t in (1, 2) for k in range(KEYS)])
    records = run(tmp_path, rows, *(["--window", "4"] if "window" in order else []))
    assert [r["id"] for r in records] == [r["id"] for r in rows]  # one record a line, in input order
    ok = [r for r in records if r["status"] == "ok"]
    refused = [r for r in records if r["status"] != "ok"]
    assert all(r["error"]["type"] == "TooManySessions" and "max_sessions" in r["error"]["message"]
               for r in refused), refused
    most = max(r["output"]["data"][1] for r in ok)
    assert most <= PLACES, f"{most} session processes were alive at once"
    for r in ok:  # each key's lines on its own state, in order
        key, turn = r["id"].split("-")
        assert r["output"]["data"][0] == f"{key}:{turn}", r
    if "window" in order:  # the first keys hold every place, and their next lines lie past the window
        assert {r["id"] for r in ok} == {f"k{k}-{t}" for k in range(PLACES) for t in (1, 2)}
    else:  # the lines of the keys that wait are read; they run as places free up
        assert len(ok) == len(rows)
