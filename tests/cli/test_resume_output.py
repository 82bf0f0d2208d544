"""A resumed job's output equals an uninterrupted one's, bad-line records included.

The input mixes calls with the records that never run: duplicate ids (of lines before and after the
point where the job stopped), malformed lines, unknown tools. OUT cut at every point, then resumed,
must give the uninterrupted output line for line, apart from ``RUN_FIELDS`` (``duration_s``,
``worker_pid``, ``started_at``: where and when a call ran, which differs from run to run); so must a
real Ctrl-C (SIGINT) and a real SIGKILL, then ``--resume``. The tool is idempotent (it only echoes),
so the calls the interruption caught are run again rather than reported ``OutcomeUnknown``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, child_env, read_jsonl, write_jsonl
from toolfork import cli
from toolfork.commands._output import RUN_FIELDS

SPEC = "tests/cli/journal_tools.py:TOOLS"


def _rows(n: int, seconds: float = 0.0) -> list[Any]:
    rows: list[Any] = []
    for i in range(n):
        rows.append({"id": f"r{i}", "name": "slow_echo", "arguments": {"text": str(i), "seconds": seconds}})
        if i % 5 == 2:
            rows.append({"id": f"r{i - 2}", "name": "slow_echo", "arguments": {"text": "dup"}})  # duplicate id
        if i % 7 == 3:
            rows.append('{"id": "broken", "name": ')  # malformed: gets the id line-N
        if i % 11 == 5:
            rows.append({"id": f"u{i}", "name": "no_such_tool", "arguments": {}})
        if i % 13 == 6:
            rows.append({"id": f"r{i}", "name": "slow_echo", "arguments": {"text": "dup of the line before"}})
    return rows


def _comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in RUN_FIELDS} for r in records]


@pytest.mark.parametrize("lane", ["1", "0"], ids=["lane", "general"])
def test_resuming_from_any_point_gives_the_uninterrupted_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                lane: str) -> None:
    monkeypatch.setenv("TOOLFORK_LINE_LANE", lane)
    calls = write_jsonl(tmp_path / "calls.jsonl", _rows(40))
    whole = tmp_path / "whole.jsonl"
    assert cli.main(["run", str(calls), "-o", str(whole), "--tools", SPEC, "--workers", "2", "-q"]) == 1
    expected = _comparable(read_jsonl(whole))
    assert sum("duplicate id" in (r["error"] or {}).get("message", "") for r in expected) >= 10
    lines = whole.read_bytes().splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    for cut in range(0, len(lines), 3):
        out.write_bytes(b"".join(lines[:cut]))
        Path(f"{out}.journal").unlink(missing_ok=True)
        assert cli.main(["run", str(calls), "-o", str(out), "--tools", SPEC, "--workers", "2", "-q",
                         "--resume", "--missing-journal-ok"]) == 1
        assert _comparable(read_jsonl(out)) == expected, f"resumed after {cut} lines"


def _interrupt_and_resume(tmp_path: Path, how: signal.Signals, lane: str) -> tuple[list[Any], list[Any]]:
    calls = write_jsonl(tmp_path / "calls.jsonl", _rows(60, seconds=0.02))
    env = child_env()
    env["TOOLFORK_LINE_LANE"] = lane
    # A small window: a warm stop (SIGINT) finishes the calls taken, which must not be the whole input.
    base = [sys.executable, "-m", "toolfork", "run", str(calls), "--tools", SPEC, "--workers", "2", "-q",
            "--window", "4"]
    whole = tmp_path / "whole.jsonl"
    subprocess.run([*base, "-o", str(whole)], env=env, cwd=REPO, timeout=120, check=False)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([*base, "-o", str(out)], env=env, cwd=REPO, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and (not out.exists() or out.stat().st_size < 2000):
            time.sleep(0.01)
        os.killpg(proc.pid, how) if how == signal.SIGINT else proc.send_signal(how)  # Ctrl-C reaches the group
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    written = len(read_jsonl(out))
    assert 0 < written < len(read_jsonl(whole)), "the job was not interrupted midway"
    end = time.monotonic() + 15  # a SIGKILLed host's workers leave on their own
    while time.monotonic() < end:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    subprocess.run([*base, "-o", str(out), "--resume"], env=env, cwd=REPO, timeout=120, check=False)
    return _comparable(read_jsonl(whole)), _comparable(read_jsonl(out))


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
@pytest.mark.parametrize("lane", ["1", "0"], ids=["lane", "general"])
def test_a_job_interrupted_then_resumed_writes_the_uninterrupted_output(tmp_path: Path, how: signal.Signals,
                                                                        lane: str) -> None:
    expected, resumed = _interrupt_and_resume(tmp_path, how, lane)
    assert resumed == expected
