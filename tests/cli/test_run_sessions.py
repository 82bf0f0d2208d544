"""``toolfork run --session-factory``: lines with a "session" key run as sessions, as a user runs them.

Every test runs ``toolfork run`` as a real process on a calls file, with the tools and the factory in a
module written to ``tmp_path``: one session per key, its lines in input order on its own state, sessions
beside each other and beside plain lines, records in input order; a crash loses a session (its later
lines name the call) unless ``--session-checkpoint``; bad lines get their records; ``--resume`` never
runs a half-done session's calls on a fresh state unless ``--replay-sessions``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, child_env, read_jsonl, write_jsonl

TOOLS = '''
import os, time
from toolfork import ToolRuntime, tool


class Account:
    def __init__(self, owner, balance=0):
        if owner == "nobody":
            raise ValueError("there is no account for nobody")
        if owner == "stuck":
            time.sleep(3600)
        self.owner, self.balance = owner, balance


def make(owner, balance=0):
    return Account(owner, balance)


@tool
def deposit(amount: int, runtime: ToolRuntime) -> str:
    """Add to the balance.

    Args:
        amount: how much
    """
    runtime.state.balance += amount
    with open(os.environ["EFFECTS"], "a") as f:
        f.write(f"{runtime.state.owner}+{amount}\\n")
    return f"{runtime.state.owner}:{runtime.state.balance}"


@tool
def slow(seconds: float, runtime: ToolRuntime) -> list:
    """Sleep, and say when it ran.

    Args:
        seconds: how long
    """
    start = time.time()
    time.sleep(seconds)
    return [start, time.time()]


@tool
def crash(runtime: ToolRuntime) -> str:
    """Kill the session's process."""
    os._exit(3)


@tool
def double(x: int) -> int:
    """Twice x.

    Args:
        x: a number
    """
    return 2 * x


TOOLS = [deposit, slow, crash, double]
'''


@pytest.fixture
def job(tmp_path: Path) -> Path:
    (tmp_path / "bank.py").write_text(TOOLS)
    return tmp_path


def toolfork_run(where: Path, rows: list[Any] | None, *extra: str, factory: str | None = "make",
                 stdin: str | None = None, lane: str = "1") -> subprocess.CompletedProcess[str]:
    calls = "-" if rows is None else str(write_jsonl(where / "calls.jsonl", rows))
    args = [calls, "-o", str(where / "out.jsonl"), "--tools", f"{where}/bank.py:TOOLS", "--workers", "2", "-q"]
    if factory is not None:
        args += ["--session-factory", f"{where}/bank.py:{factory}"]
    env = {**child_env(), "EFFECTS": str(where / "effects.txt"), "TOOLFORK_LINE_LANE": lane}
    return subprocess.run([sys.executable, "-m", "toolfork.cli", "run", *args, *extra], input=stdin,
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def dep(cid: str, amount: int, session: Any = None, args: Any = None, **more: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"id": cid, "name": "deposit", "arguments": {"amount": amount}, **more}
    if session is not None:
        row["session"] = session
    if args is not None:
        row["session_args"] = args
    return row


def texts(out: Path) -> dict[str, str]:
    """id -> the text of an ok record, or the error type of a failed one."""
    return {r["id"]: r["output"]["content"][0]["text"] if r["status"] == "ok" else r["error"]["type"]
            for r in read_jsonl(out)}


BANK = [
    dep("a1", 5, "A", {"owner": "ann"}),
    dep("b1", 1, "B", ["bob", 100]),  # positional arguments
    {"id": "p1", "name": "double", "arguments": {"x": 4}},  # no session: the pool
    dep("a2", 5, "A"),
    dep("b2", 1, "B", ["bob", 100]),  # the same session_args again: fine
    dep("a3", 5, "A"),
]


def test_each_key_is_one_state_its_lines_in_input_order_records_in_input_order(job: Path) -> None:
    done = toolfork_run(job, BANK)
    assert done.returncode == 0, done.stderr
    records = read_jsonl(job / "out.jsonl")
    assert [r["id"] for r in records] == ["a1", "b1", "p1", "a2", "b2", "a3"]
    assert texts(job / "out.jsonl") == {"a1": "ann:5", "b1": "bob:101", "p1": "8", "a2": "ann:10",
                                        "b2": "bob:102", "a3": "ann:15"}
    pids = {r["id"]: r["worker_pid"] for r in records}
    assert pids["a1"] == pids["a2"] == pids["a3"] != pids["b1"] == pids["b2"]


def test_the_same_from_a_pipe_and_in_sequential_mode(job: Path) -> None:
    piped = toolfork_run(job, None, stdin="".join(json.dumps(r) + "\n" for r in BANK))
    assert piped.returncode == 0, piped.stderr
    first = texts(job / "out.jsonl")
    sequential = toolfork_run(job, BANK, "--mode", "sequential")
    assert sequential.returncode == 0, sequential.stderr
    assert texts(job / "out.jsonl") == first == {"a1": "ann:5", "b1": "bob:101", "p1": "8", "a2": "ann:10",
                                                 "b2": "bob:102", "a3": "ann:15"}


def test_sessions_run_beside_each_other(job: Path) -> None:
    rows = [{"id": f"{k}{i}", "name": "slow", "arguments": {"seconds": 0.6}, "session": k,
             "session_args": {"owner": k}} for i in range(2) for k in "AB"]
    done = toolfork_run(job, rows)
    assert done.returncode == 0, done.stderr
    spans = {r["id"]: r["output"]["data"] for r in read_jsonl(job / "out.jsonl")}
    assert spans["A0"][1] <= spans["A1"][0] and spans["B0"][1] <= spans["B1"][0]  # in order within one
    assert spans["A0"][0] < spans["B0"][1] and spans["B0"][0] < spans["A0"][1]  # the two overlap


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_crash_loses_its_session_only_unless_checkpointed(job: Path, checkpoint: bool) -> None:
    rows = [dep("a1", 5, "A", {"owner": "ann"}), dep("b1", 1, "B", {"owner": "bob"}),
            {"id": "a2", "name": "crash", "arguments": {}, "session": "A"},
            dep("a3", 5, "A"), dep("b2", 1, "B"), dep("a4", 5, "A")]
    done = toolfork_run(job, rows, *(["--session-checkpoint"] if checkpoint else []))
    assert done.returncode == 1, done.stderr  # failures: exit 1
    records = {r["id"]: r for r in read_jsonl(job / "out.jsonl")}
    assert records["a2"]["status"] == "crashed"
    if checkpoint:
        assert texts(job / "out.jsonl") == {"a1": "ann:5", "b1": "bob:1", "a2": "WorkerCrashed", "a3": "ann:10",
                                            "b2": "bob:2", "a4": "ann:15"}
    else:
        assert texts(job / "out.jsonl") == {"a1": "ann:5", "b1": "bob:1", "a2": "WorkerCrashed",
                                            "a3": "SessionLost", "b2": "bob:2", "a4": "SessionLost"}
        assert "'a2' (tool 'crash')" in records["a4"]["error"]["message"]


def test_bad_session_lines_get_their_own_records(job: Path) -> None:
    rows = [dep("a1", 5, "A", {"owner": "ann"}),
            dep("x1", 1, 3),  # key not a string
            dep("x2", 1, ""),  # empty key
            dep("x3", 1, "A", {"owner": "zed"}),  # other session_args than the first line's
            dep("x4", 1, "D", "ann"),  # session_args neither object nor array
            {"id": "x5", "name": "deposit", "arguments": {"amount": 1}, "session_args": {"owner": "q"}},  # no key
            dep("n1", 1, "N", {"owner": "nobody"}),  # the factory raises
            dep("n2", 1, "N"),
            dep("a2", 5, "A")]
    done = toolfork_run(job, rows)
    assert done.returncode == 1, done.stderr
    records = {r["id"]: r for r in read_jsonl(job / "out.jsonl")}
    assert [r["id"] for r in read_jsonl(job / "out.jsonl")] == [r["id"] for r in rows]
    assert texts(job / "out.jsonl") == {"a1": "ann:5", "x1": "MalformedCallError", "x2": "MalformedCallError",
                                        "x3": "MalformedCallError", "x4": "MalformedCallError",
                                        "x5": "MalformedCallError", "n1": "SessionFactoryFailed",
                                        "n2": "SessionFactoryFailed", "a2": "ann:10"}
    message = {k: r["error"]["message"] for k, r in records.items() if r["status"] != "ok"}
    assert '"session" must be a non-empty string' in message["x1"] and "got a number" in message["x1"]
    assert "got an empty string" in message["x2"]
    assert "differ from those of the first line of session 'A'" in message["x3"]
    assert '"session_args" must be an object' in message["x4"] and "got a string" in message["x4"]
    assert '"session_args" without a "session" key' in message["x5"]
    assert "there is no account for nobody" in message["n1"] and "bank.py:make" in message["n2"]


def test_a_factory_that_never_returns_fails_its_session_at_the_timeout(job: Path) -> None:
    rows = [dep("s1", 1, "S", {"owner": "stuck"}), dep("a1", 5, "A", {"owner": "ann"}), dep("s2", 1, "S"),
            dep("a2", 5, "A")]
    done = toolfork_run(job, rows, "--timeout", "1")
    assert done.returncode == 1, done.stderr
    records = {r["id"]: r for r in read_jsonl(job / "out.jsonl")}
    assert texts(job / "out.jsonl") == {"s1": "SessionFactoryFailed", "a1": "ann:5", "s2": "SessionFactoryFailed",
                                        "a2": "ann:10"}
    assert "did not return within the executor's timeout (1 s)" in records["s1"]["error"]["message"]


@pytest.mark.parametrize("lane", ["1", "0"])
def test_session_lines_without_a_factory_are_refused_line_by_line(job: Path, lane: str) -> None:
    done = toolfork_run(job, BANK, factory=None, lane=lane)
    assert done.returncode == 1, done.stderr
    records = read_jsonl(job / "out.jsonl")
    assert [r["id"] for r in records] == [r["id"] for r in BANK]
    assert texts(job / "out.jsonl")["p1"] == "8"
    refused = [r for r in records if r["id"] != "p1"]
    assert all("needs --session-factory" in r["error"]["message"] for r in refused)
    assert not (job / "effects.txt").exists()  # no session line ran


@pytest.mark.parametrize("spec", ["missing_module_xyz:make", "{where}/bank.py:no_such", "{where}/bank.py:TOOLS"])
def test_a_factory_that_cannot_be_loaded_is_exit_2_before_any_call(job: Path, spec: str) -> None:
    done = toolfork_run(job, BANK, "--session-factory", spec.format(where=job), factory=None)
    assert done.returncode == 2
    assert "toolfork run: error:" in done.stderr and spec.split(":")[1 if "{" in spec else 0] in done.stderr
    assert not (job / "effects.txt").exists()
    assert not (job / "out.jsonl").exists() or (job / "out.jsonl").read_text() == ""


def _interrupted(job: Path, rows: list[Any], records: int) -> None:
    """What a job killed after writing ``records`` records leaves: OUT cut there, every start journaled."""
    done = toolfork_run(job, rows)
    assert done.returncode == 0, done.stderr
    out = job / "out.jsonl"
    out.write_bytes(b"".join(out.read_bytes().splitlines(keepends=True)[:records]))
    (job / "effects.txt").unlink()


RESUMED = [dep("a1", 5, "A", {"owner": "ann"}), dep("a2", 5, "A"), dep("b1", 1, "B", {"owner": "bob"}),
           dep("a3", 5, "A"), dep("b2", 1, "B")]


def test_resume_does_not_run_a_half_done_session_on_a_fresh_state(job: Path) -> None:
    _interrupted(job, RESUMED, 2)  # a1, a2 written; the journal also has b1.. a3, b2 as started
    (job / "out.jsonl.journal").write_text(
        (job / "out.jsonl.journal").read_text().split('{"started"')[0] + '{"started": "a1"}\n{"started": "a2"}\n')
    done = toolfork_run(job, RESUMED, "--resume")
    assert done.returncode == 1, done.stderr
    assert texts(job / "out.jsonl") == {"a1": "ann:5", "a2": "ann:10", "b1": "bob:1", "a3": "SessionNotResumed",
                                        "b2": "bob:2"}
    assert "--replay-sessions" in read_jsonl(job / "out.jsonl")[3]["error"]["message"]
    assert sorted((job / "effects.txt").read_text().split()) == ["bob+1", "bob+1"]


def test_replay_sessions_runs_the_done_calls_again_then_goes_on(job: Path) -> None:
    _interrupted(job, RESUMED, 3)
    journal = job / "out.jsonl.journal"
    journal.write_text(journal.read_text().split('{"started"')[0] + "".join(
        f'{{"started": "{i}"}}\n' for i in ("a1", "a2", "b1")))
    done = toolfork_run(job, RESUMED, "--resume", "--replay-sessions")
    assert done.returncode == 0, done.stderr
    assert texts(job / "out.jsonl") == {"a1": "ann:5", "a2": "ann:10", "b1": "bob:1", "a3": "ann:15", "b2": "bob:2"}
    assert sorted((job / "effects.txt").read_text().split()) == ["ann+5", "ann+5", "ann+5", "bob+1", "bob+1"]


def test_a_session_call_that_may_have_run_stops_its_session_on_resume(job: Path) -> None:
    _interrupted(job, RESUMED, 1)  # a1 written; a2 started (journal) with no record: OutcomeUnknown
    journal = job / "out.jsonl.journal"
    journal.write_text(journal.read_text().split('{"started"')[0] + '{"started": "a1"}\n{"started": "a2"}\n')
    done = toolfork_run(job, RESUMED, "--resume", "--replay-sessions")
    assert done.returncode == 1, done.stderr
    assert texts(job / "out.jsonl") == {"a1": "ann:5", "a2": "OutcomeUnknown", "b1": "bob:1",
                                        "a3": "SessionNotResumed", "b2": "bob:2"}
    assert "'a2'" in read_jsonl(job / "out.jsonl")[3]["error"]["message"]


def test_the_session_options_need_their_partners(job: Path) -> None:
    no_resume = toolfork_run(job, BANK, "--replay-sessions")
    assert no_resume.returncode == 2 and "--replay-sessions is for --resume" in no_resume.stderr
    no_factory = toolfork_run(job, BANK, "--session-checkpoint", factory=None)
    assert no_factory.returncode == 2 and "are for --session-factory" in no_factory.stderr
    assert not (job / "effects.txt").exists()


def test_a_co_process_gets_each_session_record_before_it_sends_the_next_line(job: Path) -> None:
    """``run - -o -`` driven line by line: the next line of a session is written only after the record
    of the one before was read, so a record held back until more input came would hang here."""
    args = ["-", "-o", "-", "--tools", f"{job}/bank.py:TOOLS", "--session-factory", f"{job}/bank.py:make", "-q"]
    proc = subprocess.Popen([sys.executable, "-m", "toolfork.cli", "run", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO,
                            env={**child_env(), "EFFECTS": str(job / "effects.txt")})
    assert proc.stdin is not None and proc.stdout is not None
    watchdog = threading.Timer(60, proc.kill)  # a record that never comes: readline sees EOF, not a hang
    watchdog.start()
    try:
        got = []
        for row in [dep("a1", 5, "A", {"owner": "ann"}), dep("a2", 5, "A"),
                    {"id": "p1", "name": "double", "arguments": {"x": 4}}, dep("a3", 1, "A")]:
            proc.stdin.write(json.dumps(row) + "\n")
            proc.stdin.flush()
            record = json.loads(proc.stdout.readline())
            got.append((record["id"], record["output"]["content"][0]["text"]))
        proc.stdin.close()
        assert proc.wait(60) == 0
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
    assert got == [("a1", "ann:5"), ("a2", "ann:10"), ("p1", "8"), ("a3", "ann:11")]
