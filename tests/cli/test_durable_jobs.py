"""Exactly once, the way batch jobs really fail: a second writer, a changed input, a lost or damaged
journal, Ctrl-C and SIGTERM. Real ``toolfork run`` processes; the tools write an effect log, so "no effect
twice, none missing under an ok record" is checked on what really happened.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, child_env, read_jsonl, run_process, toolfork_cmd, write_jsonl
from toolfork.commands._output import RUN_FIELDS

SPEC = "tests/cli/journal_tools.py:TOOLS"


def _rows(effects: Path, n: int, seconds: float = 0.0, gate: Path | None = None, ids: bool = True) -> list[Any]:
    rows = []
    for i in range(n):
        arguments: dict[str, Any] = {"path": str(effects), "seconds": seconds}
        if gate is not None:
            arguments["gate"] = str(gate)
        row: dict[str, Any] = {"name": "paced_effect", "arguments": arguments}
        if ids:
            row = {"id": f"c{i:03d}", **row}
        rows.append(row)
    return rows


def _args(calls: Path, out: Path, *extra: str) -> list[str]:
    return ["run", str(calls), "-o", str(out), "--tools", SPEC, "--workers", "2", "-q", *extra]


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(toolfork_cmd(*args), cwd=REPO, env=env or child_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def _wait_for(check: Any, what: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"never saw {what}"
        time.sleep(0.01)


def _records(out: Path) -> int:
    return out.read_bytes().count(b"\n") if out.exists() else 0


def _effects(path: Path) -> Counter[str]:
    return Counter(path.read_text().split()) if path.exists() else Counter()


def _comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in RUN_FIELDS} for r in records]


# ------------------------------------------------------------------------------------ one writer


@pytest.mark.parametrize("second", [[], ["--resume"]], ids=["a-second-job", "a-resume-racing-it"])
def test_a_second_writer_is_refused_at_once_naming_the_first(tmp_path: Path, second: list[str]) -> None:
    effects, gate, out = tmp_path / "effects.txt", tmp_path / "gate", tmp_path / "out.jsonl"
    rows = _rows(effects, 12, gate=gate)
    rows[0]["arguments"].pop("gate")  # one record is written; the rest wait at the gate
    calls = write_jsonl(tmp_path / "calls.jsonl", rows)
    gate.write_text("closed")
    first = _start(*_args(calls, out, "--window", "4"))
    try:
        _wait_for(lambda: _records(out) >= 1, "the first job's first record")
        before = out.read_bytes()
        refused = run_process(*_args(calls, out, *second))
        assert first.poll() is None  # it raced a live job
        assert refused.returncode == 2, refused.stderr
        assert f"is being written by process {first.pid}" in refused.stderr
        assert "one writer at a time" in refused.stderr
        assert out.read_bytes() == before  # the refused run changed nothing
    finally:
        gate.unlink()
        code, err = _finish(first)
    assert code == 0, err
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [r["id"] for r in rows] and {r["status"] for r in records} == {"ok"}
    assert _effects(effects) == Counter(r["id"] for r in rows)  # every call once: none by the refused run


def test_a_sigkilled_writer_never_blocks_its_resume(tmp_path: Path) -> None:
    """The lock dies with the host: its workers (which outlive it for a moment) never hold it."""
    effects, gate, out = tmp_path / "effects.txt", tmp_path / "gate", tmp_path / "out.jsonl"
    rows = _rows(effects, 6, gate=gate)
    calls = write_jsonl(tmp_path / "calls.jsonl", rows)
    gate.write_text("closed")
    first = _start(*_args(calls, out), env={**child_env(), "TOOLFORK_LINE_LANE": "1"})
    try:
        journal = f"{out}.journal"
        _wait_for(lambda: os.path.exists(journal) and b'"started"' in Path(journal).read_bytes(), "a started call")
        workers = [int(p) for p in Path(f"/proc/{first.pid}/task/{first.pid}/children").read_text().split()]
        for pid in workers:  # no forked process holds OUT or the journal (so none holds their locks)
            held = {os.path.realpath(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            assert str(out) not in held and journal not in held, pid
        first.send_signal(signal.SIGKILL)
        first.wait()
        gate.unlink()
        resumed = run_process(*_args(calls, out, "--resume"))
        assert resumed.returncode == 1, resumed.stderr  # the calls that were running: OutcomeUnknown
    finally:
        gate.unlink(missing_ok=True)
        _finish(first)
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [r["id"] for r in rows]
    assert {r["error"]["type"] for r in records if r["status"] != "ok"} <= {"OutcomeUnknown"}
    counts = _effects(effects)
    assert max(counts.values(), default=1) == 1
    assert all(counts[r["id"]] == 1 for r in records if r["status"] == "ok")


# ---------------------------------------------------------------------- the world changed between runs


def _half_done(tmp_path: Path, rows: list[Any], keep: int) -> tuple[Path, Path, Path]:
    """A job run to its end, then OUT cut after ``keep`` records: what a job killed there leaves."""
    effects, out = tmp_path / "effects.txt", tmp_path / "out.jsonl"
    calls = write_jsonl(tmp_path / "calls.jsonl", rows)
    done = run_process(*_args(calls, out))
    assert done.returncode == 0, done.stderr
    out.write_bytes(b"".join(out.read_bytes().splitlines(keepends=True)[:keep]))
    return calls, out, effects


def test_an_inserted_line_in_an_input_without_ids_is_caught(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    rows = _rows(effects, 6, ids=False)  # ids line-1 .. line-6
    calls, out, _ = _half_done(tmp_path, rows, 3)
    cut = out.read_bytes()
    write_jsonl(calls, [*rows[:1], {"name": "paced_effect", "arguments": {"path": str(effects)}},
                        *rows[1:]])
    refused = run_process(*_args(calls, out, "--resume"))
    assert refused.returncode == 2, refused.stderr
    assert "what differs: the input: 6 lines" in refused.stderr and "7 lines" in refused.stderr
    assert "--accept-changes" in refused.stderr
    assert out.read_bytes() == cut


@pytest.mark.parametrize(("extra", "differs"), [
    (["--tools", "tests/cli/cli_tools.py:echo"], "the tools: new: echo"),
    (["--timeout", "7"], "--timeout: None when the job started, 7.0 now"),
], ids=["tools", "options"])
def test_other_tools_or_options_are_caught_unless_accepted(tmp_path: Path, extra: list[str], differs: str) -> None:
    rows = _rows(tmp_path / "effects.txt", 4)
    calls, out, effects = _half_done(tmp_path, rows, 4)  # all done: only the refusal is looked at
    refused = run_process(*_args(calls, out, "--resume", *extra))
    assert refused.returncode == 2 and differs in refused.stderr, refused.stderr
    accepted = run_process(*_args(calls, out, "--resume", "--accept-changes", *extra))
    assert accepted.returncode == 0, accepted.stderr
    again = run_process(*_args(calls, out, "--resume", *extra))  # accepted once: what the job runs on now
    assert again.returncode == 0, again.stderr
    assert [r["id"] for r in read_jsonl(out)] == [r["id"] for r in rows]
    assert _effects(effects) == Counter(r["id"] for r in rows)


def test_a_missing_journal_is_no_silent_resume(tmp_path: Path) -> None:
    rows = _rows(tmp_path / "effects.txt", 5)
    calls, out, effects = _half_done(tmp_path, rows, 2)
    Path(f"{out}.journal").unlink()  # moved, or OUT copied to another machine without it
    cut = out.read_bytes()
    refused = run_process(*_args(calls, out, "--resume"))
    assert refused.returncode == 2, refused.stderr
    assert "has no journal beside it" in refused.stderr and "--missing-journal-ok" in refused.stderr
    assert out.read_bytes() == cut and not Path(f"{out}.journal").exists()
    assert _effects(effects) == Counter(r["id"] for r in rows)  # nothing ran
    going_on = run_process(*_args(calls, out, "--resume", "--missing-journal-ok"))
    assert going_on.returncode == 0, going_on.stderr  # by the user's choice: the in-flight calls run again
    assert [r["id"] for r in read_jsonl(out)] == [r["id"] for r in rows]
    again = run_process(*_args(calls, out, "--resume"))  # the new journal took over OUT's records
    assert again.returncode == 0, again.stderr


def _foreign_journal(tmp_path: Path) -> bytes:
    other = tmp_path / "other"
    other.mkdir()
    rows = [{"id": f"x{i}", "name": "key", "arguments": {"text": str(i)}} for i in range(3)]
    calls = write_jsonl(other / "calls.jsonl", rows)
    assert run_process(*_args(calls, other / "out.jsonl")).returncode == 0
    return (other / "out.jsonl.journal").read_bytes()


@pytest.mark.parametrize("damage", ["5", "null", '["started"]', "entry-5", "entry-started-5", "entry-array",
                                    "fifo", "directory", "another-jobs", "cut-short"])
def test_a_damaged_or_foreign_journal_is_exit_2_naming_file_and_line(tmp_path: Path, damage: str) -> None:
    rows = _rows(tmp_path / "effects.txt", 4)
    calls, out, effects = _half_done(tmp_path, rows, 2)
    journal = Path(f"{out}.journal")
    head = journal.read_bytes().splitlines(keepends=True)[0]
    expected = {"5": "line 1", "null": "line 1", '["started"]': "line 1", "entry-5": "line 2",
                "entry-started-5": "line 2", "entry-array": "line 2", "fifo": "a FIFO", "directory": "a directory",
                "another-jobs": "never saw it start", "cut-short": "never saw it start"}[damage]
    if damage in ("5", "null", '["started"]'):
        journal.write_text(damage + "\n")
    elif damage.startswith("entry-"):
        bad = {"entry-5": b"5\n", "entry-started-5": b'{"started": 5}\n', "entry-array": b'["started", "c000"]\n'}
        journal.write_bytes(head + bad[damage])
    elif damage == "fifo":
        journal.unlink()
        os.mkfifo(journal)
    elif damage == "directory":
        journal.unlink()
        journal.mkdir()
    elif damage == "another-jobs":
        journal.write_bytes(_foreign_journal(tmp_path))
    else:
        journal.write_bytes(head)  # every start gone
    cut = out.read_bytes()
    refused = run_process(*_args(calls, out, "--resume"), timeout=60)  # a FIFO must not hang it
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert str(journal) in refused.stderr and expected in refused.stderr, refused.stderr
    assert out.read_bytes() == cut
    assert _effects(effects) == Counter(r["id"] for r in rows)  # nothing ran


# ------------------------------------------------------------------------------ keys that hold

SESSION_TOOLS = '''
from toolfork import ToolRuntime, tool


def make(owner):
    return {"owner": owner}


@tool(idempotent=True)
def key(text: str, runtime: ToolRuntime) -> str:
    """This call's idempotency key (in a session or not).

    Args:
        text: a tag
    """
    return f"{text}:{runtime.idempotency_key}"


TOOLS = [key]
'''


def test_every_call_of_a_session_job_keeps_its_key_across_resumes(tmp_path: Path) -> None:
    (tmp_path / "keys.py").write_text(SESSION_TOOLS)
    rows = [{"id": "s1", "name": "key", "arguments": {"text": "s1"}, "session": "A", "session_args": ["ann"]},
            {"id": "p1", "name": "key", "arguments": {"text": "p1"}},
            {"id": "s2", "name": "key", "arguments": {"text": "s2"}, "session": "A"}]
    calls, out = write_jsonl(tmp_path / "calls.jsonl", rows), tmp_path / "out.jsonl"
    args = ["run", str(calls), "-o", str(out), "--tools", f"{tmp_path}/keys.py:TOOLS", "--session-factory",
            f"{tmp_path}/keys.py:make", "-q"]
    assert run_process(*args).returncode == 0
    first = [r["output"]["content"][0]["text"] for r in read_jsonl(out)]
    out.write_bytes(b"")  # killed before any record; every call started: all idempotent, all run again
    resumed = run_process(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["output"]["content"][0]["text"] for r in read_jsonl(out)] == first
    assert len({k.split(":")[1] for k in first}) == 3


BANK = '''
import os
from toolfork import ToolRuntime, tool


def make(owner):
    return {"owner": owner, "balance": 0}


@tool
def deposit(amount: int, runtime: ToolRuntime) -> str:
    """Add to the balance, and log the effect.

    Args:
        amount: how much
    """
    runtime.state["balance"] += amount
    with open(os.environ["EFFECTS"], "a") as f:
        f.write(f"{runtime.call_id}\\n")
    return str(runtime.state["balance"])


TOOLS = [deposit]
'''


def test_a_session_call_that_may_have_acted_is_outcome_unknown_not_not_run(tmp_path: Path) -> None:
    (tmp_path / "bank.py").write_text(BANK)
    rows = [{"id": f"a{i}", "name": "deposit", "arguments": {"amount": 1}, "session": "A",
             **({"session_args": ["ann"]} if i == 0 else {})} for i in range(3)]
    calls, out = write_jsonl(tmp_path / "calls.jsonl", rows), tmp_path / "out.jsonl"
    env = {**child_env(), "EFFECTS": str(tmp_path / "effects.txt")}
    args = [*toolfork_cmd("run", str(calls), "-o", str(out), "--tools", f"{tmp_path}/bank.py:TOOLS",
                          "--session-factory", f"{tmp_path}/bank.py:make", "-q")]
    assert subprocess.run(args, cwd=REPO, env=env, timeout=120).returncode == 0
    out.write_bytes(out.read_bytes().splitlines(keepends=True)[0])  # killed after a0's record; a1, a2 had run
    subprocess.run([*args, "--resume"], cwd=REPO, env=env, timeout=120)
    records = read_jsonl(out)
    assert [r["error"]["type"] if r["error"] else r["status"] for r in records] == \
        ["ok", "OutcomeUnknown", "OutcomeUnknown"]
    assert _effects(tmp_path / "effects.txt") == Counter({"a0": 1, "a1": 1, "a2": 1})  # none ran again


# -------------------------------------------------------------------------------- Ctrl-C, SIGTERM


WAYS = {"lane": ("1", []), "general": ("0", []), "sequential": ("0", ["--mode", "sequential"])}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_warm_stops_at_random_moments_then_resumes_equal_an_uninterrupted_run(tmp_path: Path, way: str) -> None:
    lane, mode = WAYS[way]
    rng = random.Random(f"warm-{way}")
    env = {**child_env(), "TOOLFORK_LINE_LANE": lane}
    effects, whole_effects = tmp_path / "effects.txt", tmp_path / "whole-effects.txt"
    rows = _rows(effects, 60, seconds=0.05)
    calls, out = write_jsonl(tmp_path / "calls.jsonl", rows), tmp_path / "out.jsonl"
    whole = tmp_path / "whole.jsonl"
    uninterrupted = write_jsonl(tmp_path / "whole-calls.jsonl", _rows(whole_effects, 60, seconds=0.05))
    assert subprocess.run(toolfork_cmd(*_args(uninterrupted, whole, *mode)), env=env, cwd=REPO,
                          timeout=120).returncode == 0
    expected = read_jsonl(whole)
    resume: list[str] = []
    for round_ in range(4):
        done = _records(out)
        proc = _start(*_args(calls, out, "--window", "4", *mode, *resume), env=env)
        resume = ["--resume"]
        _wait_for(lambda done=done, proc=proc: _records(out) > done or proc.poll() is not None,  # type: ignore[misc]
                  "a record")  # past the start-up
        time.sleep(rng.uniform(0, 0.4))  # at a random moment of the calls
        how = rng.choice([signal.SIGINT, signal.SIGTERM])
        proc.send_signal(how)
        code, err = _finish(proc)
        assert "Traceback" not in err, err
        if code == 0 or (code == -how and _records(out) == len(rows)):  # its calls were all done before the signal
            break
        assert code == 128 + how, err
        assert "finishing" in err and "Ctrl-C again to stop now" in err, err
        records = read_jsonl(out)
        assert {r["status"] for r in records} <= {"ok"}, f"round {round_}: {records}"  # no OutcomeUnknown
    final = run_process(*_args(calls, out, "--window", "4", *mode, "--resume"), timeout=120)
    assert final.returncode == 0, final.stderr
    records = read_jsonl(out)
    assert _comparable(records) == _comparable(expected)  # equal to an uninterrupted run's
    assert _effects(effects) == Counter(r["id"] for r in rows)  # every effect once, none missing


def test_a_hard_stop_then_status_then_rerun_unknown_as_the_docs_show(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    rows = _rows(effects, 12, seconds=0.6)
    calls, out = write_jsonl(tmp_path / "calls.jsonl", rows), tmp_path / "out.jsonl"
    proc = _start(*_args(calls, out, "--window", "4"))
    _wait_for(lambda: _records(out) >= 2, "two records")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)  # Ctrl-C again: stop now
    code, err = _finish(proc)
    assert code == 130 and "Traceback" not in err, err
    written = _records(out)
    resumed = run_process(*_args(calls, out, "--resume"), timeout=120)
    assert resumed.returncode == 1, resumed.stderr
    unknown = [r["id"] for r in read_jsonl(out) if r["status"] != "ok"]
    assert unknown and all(r["error"]["type"] == "OutcomeUnknown" for r in read_jsonl(out) if r["status"] != "ok")
    assert written <= len(rows) - len(unknown)
    ran = _effects(effects)
    status = run_process("run", "--status", str(out))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert f"{len(rows)} records: ok {len(rows) - len(unknown)}, error {len(unknown)}" in lines[0]
    assert [json.loads(line) for line in lines[2:]] == unknown
    assert _effects(effects) == ran  # --status ran nothing
    again = run_process(*_args(calls, out, "--resume", "--rerun-unknown"), timeout=120)
    assert again.returncode == 0, again.stderr
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [r["id"] for r in rows]  # replaced in place: every id once, in order
    assert {r["status"] for r in records} == {"ok"}
    counts = _effects(effects)
    assert set(counts) == {r["id"] for r in rows}  # none missing under an ok record
    assert {i for i, n in counts.items() if n > 1} <= set(unknown)  # twice only where the user asked
    status = run_process("run", "--status", str(out))
    assert "OutcomeUnknown" not in status.stdout and f"ok {len(rows)}," in status.stdout


def test_a_pending_rerun_killed_before_it_settled_is_settled_by_the_next_run(tmp_path: Path) -> None:
    rows = [{"id": f"k{i}", "name": "key", "arguments": {"text": str(i)}} for i in range(4)]
    calls, out = write_jsonl(tmp_path / "calls.jsonl", rows), tmp_path / "out.jsonl"
    assert run_process(*_args(calls, out)).returncode == 0
    records = out.read_bytes().splitlines(keepends=True)
    unknown = json.dumps({"id": "k1", "name": "key", "status": "error", "output": None,
                          "error": {"type": "OutcomeUnknown", "message": "m", "traceback": ""}}).encode() + b"\n"
    head = records[0] + unknown + records[2] + records[3]
    # A --rerun-unknown run SIGKILLed after it appended k1's new record and before it put it in place.
    out.write_bytes(head + records[1])
    with open(f"{out}.journal", "a") as j:
        j.write(json.dumps({"mark": {"rerun_from": len(head), "sha256": hashlib.sha256(head).hexdigest()}}) + "\n")
        j.write('{"started": "k1"}\n')
    assert run_process(*_args(calls, out, "--resume")).returncode == 0
    assert out.read_bytes() == b"".join(records)
    shutil.copy(out, tmp_path / "settled.jsonl")
    assert run_process(*_args(calls, out, "--resume")).returncode == 0  # nothing moves twice
    assert out.read_bytes() == (tmp_path / "settled.jsonl").read_bytes()


SLOW_BANK = BANK.replace('    runtime.state["balance"] += amount', '    import time\n    time.sleep(0.2)\n'
                         '    runtime.state["balance"] += amount')


def test_a_warm_stop_of_a_session_job_writes_every_call_it_took(tmp_path: Path) -> None:
    (tmp_path / "bank.py").write_text(SLOW_BANK)
    rows = [{"id": f"{s}{i}", "name": "deposit", "arguments": {"amount": 1}, "session": s,
             **({"session_args": [s]} if i == 0 else {})} for i in range(8) for s in ("A", "B")]
    calls, out = write_jsonl(tmp_path / "calls.jsonl", rows), tmp_path / "out.jsonl"
    env = {**child_env(), "EFFECTS": str(tmp_path / "effects.txt")}
    args = ["run", str(calls), "-o", str(out), "--tools", f"{tmp_path}/bank.py:TOOLS", "--session-factory",
            f"{tmp_path}/bank.py:make", "-q", "--window", "4"]
    proc = _start(*args, env=env)
    _wait_for(lambda: _records(out) >= 1, "a record")
    proc.send_signal(signal.SIGINT)
    code, err = _finish(proc)
    assert code == 130 and "Ctrl-C again to stop now" in err, err
    records = read_jsonl(out)
    assert 1 <= len(records) < len(rows)
    assert [r["id"] for r in records] == [r["id"] for r in rows][:len(records)]
    assert {r["status"] for r in records} == {"ok"}  # neither OutcomeUnknown nor "not run"
    assert _effects(tmp_path / "effects.txt") == Counter(r["id"] for r in records)  # none ran unrecorded
