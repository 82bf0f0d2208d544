"""The journal beside OUT: a resumed job never runs again a call that may already have acted.

Each test builds the state a killed job leaves (OUT cut short, the journal holding the starts of the
calls that were running) from a real run, then resumes it, on each way of running a job: the line
lane, the general path (``Executor.imap``) and sequential mode. The kill tests (``test_kill_resume``)
do the same with real SIGKILLs at random moments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import read_jsonl, write_jsonl
from toolfork import cli

SPEC = "tests/cli/journal_tools.py:TOOLS"
WAYS = {"lane": ([], "1"), "general": ([], "0"), "sequential": (["--mode", "sequential"], "1")}


@pytest.fixture(params=sorted(WAYS))
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    extra, lane = WAYS[request.param]
    monkeypatch.setenv("TOOLFORK_LINE_LANE", lane)
    return extra


def run(*args: str) -> int:
    return cli.main(["run", "--workers", "2", "-q", *args])


def _job(tmp_path: Path, name: str, n: int = 6) -> tuple[Path, Path, Path]:
    effects = tmp_path / "effects.txt"
    calls = write_jsonl(tmp_path / "calls.jsonl",
                        [{"id": f"c{i}", "name": name, "arguments": {"path": str(effects)}} for i in range(n)])
    return calls, tmp_path / "out.jsonl", effects


def _killed_after(out: Path, records: int) -> None:
    """What a SIGKILL leaves when the first ``records`` records were written and the rest were running:
    OUT cut after them (and a partial line), the journal holding every start."""
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:records]) + lines[records][:15])


def test_the_journal_is_beside_out_and_holds_each_start(tmp_path: Path, way: list[str]) -> None:
    calls, out, _ = _job(tmp_path, "effect", 3)
    assert run(str(calls), "-o", str(out), "--tools", SPEC, *way) == 0
    entries = [json.loads(line) for line in Path(f"{out}.journal").read_text().splitlines()]
    assert set(entries[0]) == {"job", "match"} and len(entries[0]["job"]) == 32 and entries[0]["match"] == "id"
    assert sorted(e["started"] for e in entries[1:] if "started" in e) == ["c0", "c1", "c2"]
    assert {"writer", "about"} == {k for e in entries[1:] for k in e if k != "started"}


def test_a_call_that_started_and_left_no_record_is_outcome_unknown(tmp_path: Path, way: list[str]) -> None:
    calls, out, effects = _job(tmp_path, "effect")
    assert run(str(calls), "-o", str(out), "--tools", SPEC, *way) == 0
    _killed_after(out, 2)
    assert run(str(calls), "-o", str(out), "--tools", SPEC, "--resume", *way) == 1  # failures: exit 1
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [f"c{i}" for i in range(6)]
    assert [r["status"] for r in records] == ["ok", "ok"] + ["error"] * 4
    for r in records[2:]:
        assert r["error"]["type"] == "OutcomeUnknown"
        assert "stopped while this call ran" in r["error"]["message"]
        assert "may or may not have happened" in r["error"]["message"]
    assert sorted(effects.read_text().split()) == [f"c{i}" for i in range(6)]  # each ran once, not again
    # They are records now: another resume leaves them as they are.
    assert run(str(calls), "-o", str(out), "--tools", SPEC, "--resume", *way) == 1
    assert read_jsonl(out) == records


def test_rerun_unknown_runs_them_again_by_choice(tmp_path: Path, way: list[str]) -> None:
    calls, out, effects = _job(tmp_path, "effect")
    assert run(str(calls), "-o", str(out), "--tools", SPEC, *way) == 0
    _killed_after(out, 4)
    assert run(str(calls), "-o", str(out), "--tools", SPEC, "--resume", "--rerun-unknown", *way) == 0
    assert [r["status"] for r in read_jsonl(out)] == ["ok"] * 6
    assert sorted(effects.read_text().split()) == sorted([f"c{i}" for i in range(6)] + ["c4", "c5"])


def test_an_idempotent_tool_runs_again_with_the_same_key(tmp_path: Path, way: list[str]) -> None:
    calls, out, effects = _job(tmp_path, "effect_once")
    assert run(str(calls), "-o", str(out), "--tools", SPEC, *way) == 0
    first = read_jsonl(out)
    _killed_after(out, 1)
    assert run(str(calls), "-o", str(out), "--tools", SPEC, "--resume", *way) == 0
    again = read_jsonl(out)
    assert [r["output"] for r in again] == [r["output"] for r in first]  # the same key on every run
    keys = effects.read_text().split()
    assert len(keys) == len(set(keys)) == 6  # one effect per key, six different keys


def test_calls_that_never_started_run_as_before(tmp_path: Path, way: list[str]) -> None:
    calls, out, effects = _job(tmp_path, "effect")
    assert run(str(calls), "-o", str(out), "--tools", SPEC, *way) == 0
    _killed_after(out, 2)
    journal = Path(f"{out}.journal")
    entries = journal.read_text().splitlines(keepends=True)
    kept = [e for e in entries if '"c4"' not in e and '"c5"' not in e]
    journal.write_text("".join(kept) + '{"started": "c')  # c4, c5 never started; a partial last entry
    effects.write_text("")
    assert run(str(calls), "-o", str(out), "--tools", SPEC, "--resume", *way) == 1
    records = read_jsonl(out)
    assert [r["status"] for r in records] == ["ok", "ok", "error", "error", "ok", "ok"]
    assert sorted(effects.read_text().split()) == ["c4", "c5"]
    assert all(line.endswith("\n") for line in journal.read_text().splitlines(keepends=True))


def test_a_new_job_has_new_keys_and_a_resumed_one_the_same(tmp_path: Path) -> None:
    calls = write_jsonl(tmp_path / "calls.jsonl",
                        [{"id": f"k{i}", "name": "key", "arguments": {"text": str(i)}} for i in range(4)])
    out = tmp_path / "out.jsonl"
    assert run(str(calls), "-o", str(out), "--tools", SPEC) == 0
    first = [r["output"]["content"][0]["text"] for r in read_jsonl(out)]
    assert len({k.split(":")[1] for k in first}) == 4  # one key per call
    _killed_after(out, 0)
    assert run(str(calls), "-o", str(out), "--tools", SPEC, "--resume") == 0
    assert [r["output"]["content"][0]["text"] for r in read_jsonl(out)] == first
    assert run(str(calls), "-o", str(out), "--tools", SPEC) == 0  # a new job (no --resume)
    again = [r["output"]["content"][0]["text"] for r in read_jsonl(out)]
    assert not set(again) & set(first)


def test_durable_syncs_and_keeps_the_same_entries(tmp_path: Path, way: list[str]) -> None:
    calls, out, _ = _job(tmp_path, "effect", 4)
    assert run(str(calls), "-o", str(out), "--tools", SPEC, "--durable", *way) == 0
    entries = [e for e in Path(f"{out}.journal").read_text().splitlines() if e.startswith('{"started"')]
    assert sorted(entries) == sorted(json.dumps({"started": f"c{i}"}) for i in range(4))


@pytest.mark.parametrize(("args", "message"), [
    (["--rerun-unknown"], "--rerun-unknown is for --resume"),
    (["--durable", "-o", "-"], "--durable needs -o OUT.jsonl"),
])
def test_journal_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                              message: str) -> None:
    calls, _, _ = _job(tmp_path, "effect", 1)
    assert run(str(calls), "--tools", SPEC, *args) == 2
    assert message in capsys.readouterr().err


def test_a_file_in_the_journals_place_that_is_no_journal_is_refused(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    calls, out, _ = _job(tmp_path, "effect", 1)
    Path(f"{out}.journal").write_text("hello\n")
    assert run(str(calls), "--tools", SPEC, "--resume", "-o", str(out)) == 2
    assert "is not a toolfork journal" in capsys.readouterr().err
    assert Path(f"{out}.journal").read_text() == "hello\n"  # left as it was
