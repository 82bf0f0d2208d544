"""What ``toolfork run`` shows, through the real command: log lines above the progress bar (never on
its line), ``-v`` / ``-vv`` / ``--log-level``, the counts by status and error type it ends with (also
after ``--resume`` and on SIGTERM), and the ``worker_pid`` / ``started_at`` / ``duration_s`` of every
record."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, child_env, read_jsonl, run_on_a_terminal, run_process, toolfork_cmd, write_jsonl
from toolfork import cli
from toolfork.commands._summary import Tally

SPEC = "tests/cli/observe_tools.py:TOOLS"
INLINE_SPEC = "tests/cli/observe_tools.py:INLINE_TOOLS"


def screen_lines(text: str) -> list[str]:
    """The lines a terminal shows for ``text``: ``\\r`` goes back to the line's start, ``ESC [K`` clears
    from the cursor to the line's end, a character overwrites the one under the cursor."""
    lines: list[str] = []
    line: list[str] = []
    col = i = 0
    while i < len(text):
        if text.startswith("\x1b[K", i):
            del line[col:]
            i += 3
            continue
        ch = text[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("".join(line))
            line, col = [], 0
        else:
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
        i += 1
    lines.append("".join(line))
    return lines


MIX = [
    {"id": "ok1", "name": "echo", "arguments": {"text": "a"}},
    {"id": "err1", "name": "boom", "arguments": {"message": "broken"}},
    {"id": "bad-args", "name": "echo", "arguments": {}},
    {"id": "ok2", "name": "echo", "arguments": {"text": "b"}},
    {"id": "slow", "name": "nap", "arguments": {"seconds": 60}, "timeout": 0.5},
    {"id": "dead", "name": "die", "arguments": {"code": 3}},
    {"id": "unknown", "name": "no_such_tool", "arguments": {}},
    "this line is not JSON",
    {"id": "bad-args2", "name": "nap", "arguments": {"seconds": "long"}},
]
MIX_SUMMARY = ("ok 2, error 5, timeout 1, crashed 1, cancelled 0; error types: ToolInputError 2, MalformedCallError 1, "
               "RuntimeError 1, TimeoutError 1, UnknownToolError 1, WorkerCrashed 1")


# ------------------------------------------------------------------ log lines and the bar


@pytest.mark.parametrize("lane", ["1", "0"], ids=["lane", "general"])
def test_log_lines_go_above_the_bar_never_onto_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        lane: str) -> None:
    """The bar is drawn (calls finish), then a worker's tool logs a warning and the host warns of a
    timeout: each is a terminal line of its own, and the bar comes back below them."""
    monkeypatch.setenv("TOOLFORK_LINE_LANE", lane)
    rows: list[Any] = [{"id": f"n{i}", "name": "nap", "arguments": {"seconds": 0.1 * (i + 1)}} for i in range(6)]
    rows.append({"id": "g", "name": "grumble", "arguments": {"seconds": 0.5, "text": "grumbling in a worker"}})
    rows.append({"id": "slow", "name": "nap", "arguments": {"seconds": 60}, "timeout": 1.5})
    rows += [{"id": f"m{i}", "name": "nap", "arguments": {"seconds": 0.2}} for i in range(10)]
    calls = write_jsonl(tmp_path / "calls.jsonl", rows)
    code, text = run_on_a_terminal("run", str(calls), "-o", str(tmp_path / "out.jsonl"), "--tools", SPEC,
                                   "--workers", "3")
    assert code == 1, text  # the timeout failed
    lines = screen_lines(text)
    for needle in ("grumbling in a worker", "passed its timeout of 1.5s"):
        shown = [ln for ln in lines if needle in ln]
        assert len(shown) == 1, (needle, lines)
        assert shown[0].startswith("WARNING "), shown[0]  # the line is the log line's alone, not the bar's
        assert "done," not in shown[0] and "[" not in shown[0].split(":")[0], shown[0]
    bars = [i for i, ln in enumerate(lines) if re.match(r"\[[#.]{24}\] +\d+% \d+ done", ln)]
    timeout_line = next(i for i, ln in enumerate(lines) if "passed its timeout" in ln)
    assert bars and bars[-1] > timeout_line, lines  # the bar is drawn again below the log lines
    assert "toolfork run: 18 records: ok 17, error 0, timeout 1" in text


def test_without_a_terminal_log_lines_are_plain_lines(tmp_path: Path) -> None:
    calls = write_jsonl(tmp_path / "calls.jsonl", [
        {"id": "g", "name": "grumble", "arguments": {"seconds": 0.2, "text": "grumbling in a worker"}},
        {"id": "slow", "name": "nap", "arguments": {"seconds": 60}, "timeout": 1}])
    done = run_process("run", str(calls), "-o", str(tmp_path / "out.jsonl"), "--tools", SPEC, "--workers", "2",
                       "--progress-interval", "0.1")
    assert done.returncode == 1, done.stderr
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    lines = done.stderr.splitlines()
    assert "WARNING observe_tools: grumbling in a worker" in lines, lines
    assert any(ln.startswith("WARNING toolfork.executor: tool 'nap' (call slow) passed its timeout") for ln in lines)


def test_a_basicconfig_handler_is_set_aside_with_its_format_kept_then_put_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tools module's ``logging.basicConfig`` handler: its format is kept for the log lines (and
    ``warnings.warn``) of the run, each printed once, and after the run the logging set-up is as before."""
    root = logging.getLogger()
    theirs = logging.StreamHandler(sys.stderr)
    theirs.setFormatter(logging.Formatter("CUSTOM %(name)s| %(message)s"))
    root.addHandler(theirs)
    try:
        before = (list(root.handlers), logging.getLogger("toolfork").level, warnings.showwarning)
        calls = write_jsonl(tmp_path / "calls.jsonl", [{"id": "a", "name": "shout_here", "arguments": {}}])
        code = cli.main(["run", str(calls), "-o", str(tmp_path / "out.jsonl"), "-q", "--workers", "1",
                         "--tools", INLINE_SPEC])
        after = (list(root.handlers), logging.getLogger("toolfork").level, warnings.showwarning)
    finally:
        root.removeHandler(theirs)
    assert code == 0
    assert after == before
    err = capsys.readouterr().err
    assert err.count("inline says hi") == 1 and "CUSTOM observe_tools| inline says hi" in err, err
    assert err.count("UserWarning: careful with inline tools") == 1 and "CUSTOM py.warnings| " in err, err


# ------------------------------------------------------------------ -v, -vv, --log-level


@pytest.mark.parametrize(("flags", "info", "debug", "warning"), [
    ((), False, False, True),
    (("-v",), True, False, True),
    (("-vv",), True, True, True),
    (("--log-level", "debug"), True, True, True),
    (("-vv", "--log-level", "ERROR"), False, False, False),
], ids=["default", "v", "vv", "log-level-debug", "log-level-error-wins"])
def test_verbosity(tmp_path: Path, flags: tuple[str, ...], info: bool, debug: bool, warning: bool) -> None:
    calls = write_jsonl(tmp_path / "calls.jsonl", MIX)
    done = run_process("run", str(calls), "-o", str(tmp_path / "out.jsonl"), "--tools", SPEC, "--workers", "2",
                       *flags)
    assert done.returncode == 1, done.stderr
    err = done.stderr
    assert ("INFO toolfork.run: pool started in" in err) is info, err
    assert ("INFO toolfork.run: job done in" in err) is info, err
    assert bool(re.search(r"DEBUG toolfork.run: line 5: call slow \(nap\) timeout: TimeoutError", err)) is debug, err
    assert ("DEBUG toolfork.run: input " in err) is debug, err
    assert ("WARNING toolfork.executor: tool 'nap' (call slow) passed its timeout" in err) is warning, err


@pytest.mark.parametrize("command", ["run", "worker"])
def test_an_unknown_log_level_is_a_usage_error(tmp_path: Path, command: str) -> None:
    calls = write_jsonl(tmp_path / "calls.jsonl", MIX[:1])
    args = [str(calls)] if command == "run" else []
    done = run_process(command, *args, "--tools", SPEC, "--log-level", "loud", stdin="")
    assert done.returncode == 2, done.stderr
    assert "unknown log level 'loud': choose one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in done.stderr
    assert "Traceback" not in done.stderr


def test_worker_takes_the_same_verbosity(tmp_path: Path) -> None:
    line = json.dumps({"id": "a", "name": "echo", "arguments": {"text": "x"}}) + "\n"
    quiet = run_process("worker", "--tools", SPEC, "--workers", "1", stdin=line)
    loud = run_process("worker", "--tools", SPEC, "--workers", "1", "-v", stdin=line)
    assert quiet.returncode == loud.returncode == 0, (quiet.stderr, loud.stderr)
    assert "INFO toolfork.worker: pool started: fork mode, 1 workers" not in quiet.stderr
    assert "INFO toolfork.worker: pool started: fork mode, 1 workers" in loud.stderr, loud.stderr
    record = json.loads(loud.stdout)
    assert type(record["worker_pid"]) is int and record["started_at"] > 0


# ------------------------------------------------------------------ the counts at the end


@pytest.mark.parametrize("lane", ["1", "0"], ids=["lane", "general"])
def test_the_run_ends_with_counts_by_status_and_error_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           lane: str) -> None:
    monkeypatch.setenv("TOOLFORK_LINE_LANE", lane)
    calls = write_jsonl(tmp_path / "calls.jsonl", MIX)
    out = tmp_path / "out.jsonl"
    done = run_process("run", str(calls), "-o", str(out), "--tools", SPEC, "--workers", "2")
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == f"toolfork run: 9 records: {MIX_SUMMARY}", done.stderr
    statuses = [r["status"] for r in read_jsonl(out)]
    assert statuses.count("ok") == 2 and statuses.count("timeout") == 1 and statuses.count("crashed") == 1


def test_a_resumed_run_counts_its_own_lines_and_the_whole_file(tmp_path: Path) -> None:
    calls = write_jsonl(tmp_path / "calls.jsonl", MIX)
    out = tmp_path / "out.jsonl"
    assert run_process("run", str(calls), "-o", str(out), "--tools", SPEC, "--workers", "2").returncode == 1
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:3]))  # ok1, err1, bad-args: as if the job had stopped there
    Path(f"{out}.journal").unlink()
    done = run_process("run", str(calls), "-o", str(out), "--tools", SPEC, "--workers", "2", "--resume",
                       "--missing-journal-ok")
    assert done.returncode == 1, done.stderr
    tail = done.stderr.splitlines()[-2:]
    assert tail == [
        "toolfork run: 6 records written by this run: ok 1, error 3, timeout 1, crashed 1, cancelled 0; "
        "error types: MalformedCallError 1, TimeoutError 1, ToolInputError 1, UnknownToolError 1, WorkerCrashed 1",
        f"toolfork run: 9 records in all of {out}: {MIX_SUMMARY}",
    ], done.stderr
    assert len(read_jsonl(out)) == 9


def test_counts_name_ok_records_with_an_error_output() -> None:
    tally = Tally()
    for record in [{"status": "ok", "output": {"is_error": True}, "error": None},
                   {"status": "ok", "output": {"is_error": False}, "error": None},
                   {"status": "cancelled", "output": None, "error": {"type": "Cancelled"}}]:
        tally.add(record)
    tally.add_ok(2)
    assert tally.records == 5
    assert tally.describe() == ("ok 4 (1 with an error output), error 0, timeout 0, crashed 0, cancelled 1; "
                                "error types: Cancelled 1")
    both = tally.merged(tally)
    assert both.records == 10 and both.describe().startswith("ok 8 (2 with an error output), ")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_an_interrupted_run_says_what_it_wrote(tmp_path: Path, how: signal.Signals) -> None:
    rows = [{"id": f"n{i}", "name": "nap", "arguments": {"seconds": 0.05}} for i in range(400)]
    calls = write_jsonl(tmp_path / "calls.jsonl", rows)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(toolfork_cmd("run", str(calls), "-o", str(out), "--tools", SPEC, "--workers", "2"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=REPO, env=child_env())
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and (not out.exists() or len(out.read_bytes().splitlines()) < 10):
            time.sleep(0.02)
        proc.send_signal(how)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + how, err
    written = len(read_jsonl(out))
    assert 10 <= written < 400, err
    assert "Ctrl-C again to stop now" in err  # a warm stop: the calls taken finished, their records written
    assert "stopped after the running calls finished; rerun with --resume to continue" in err
    assert err.splitlines()[-1] == (f"toolfork run: {written} records written before the interruption: ok {written}, "
                                    "error 0, timeout 0, crashed 0, cancelled 0; error types: none"), err


# ------------------------------------------------------------------ where and when each call ran


def _timed_run(tmp_path: Path, rows: list[Any], *args: str) -> tuple[list[dict[str, Any]], float, float, int]:
    calls = write_jsonl(tmp_path / "calls.jsonl", rows)
    out = tmp_path / "out.jsonl"
    before = time.time()
    proc = subprocess.Popen(toolfork_cmd("run", str(calls), "-o", str(out), "-q", *args), stdin=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=child_env())
    _, err = proc.communicate(timeout=120)
    after = time.time()
    assert proc.returncode in (0, 1), err
    return read_jsonl(out), before, after, proc.pid


@pytest.mark.parametrize("lane", ["1", "0"], ids=["lane", "general"])
def test_records_say_which_worker_ran_the_call_when_and_for_how_long(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     lane: str) -> None:
    monkeypatch.setenv("TOOLFORK_LINE_LANE", lane)
    rows: list[Any] = [
        {"id": "long", "name": "nap", "arguments": {"seconds": 1.5}},  # written first, finishes last
        {"id": "quick", "name": "echo", "arguments": {"text": "q"}},
        {"id": "err", "name": "boom", "arguments": {}},
        {"id": "slow", "name": "nap", "arguments": {"seconds": 60}, "timeout": 1},
        {"id": "dead", "name": "die", "arguments": {}},
        {"id": "unknown", "name": "no_such_tool", "arguments": {}},
        "not JSON",
    ]
    records, before, after, host_pid = _timed_run(tmp_path, rows, "--tools", SPEC, "--workers", "3")
    by_id = {r["id"]: r for r in records}
    for r in records:
        assert {"worker_pid", "started_at", "duration_s"} <= set(r), r
        assert type(r["started_at"]) is float and before <= r["started_at"] <= after, (r, before, after)
        assert r["duration_s"] >= 0 and r["started_at"] + r["duration_s"] <= after + 0.01, r
    for ran in ("long", "quick", "err", "slow", "dead"):
        pid = by_id[ran]["worker_pid"]
        assert type(pid) is int and pid not in (host_pid, os.getpid()), by_id[ran]
    assert by_id["unknown"]["worker_pid"] is None and by_id["line-7"]["worker_pid"] is None
    assert by_id["long"]["duration_s"] >= 1.4 and by_id["slow"]["duration_s"] >= 0.9
    # When the call started, not when its record was written (behind the long call, in input order).
    assert by_id["quick"]["started_at"] < by_id["long"]["started_at"] + 1.0, by_id
    assert by_id["long"]["started_at"] + by_id["long"]["duration_s"] > by_id["quick"]["started_at"] + 1.0


def test_one_worker_runs_its_calls_one_after_the_other(tmp_path: Path) -> None:
    rows = [{"id": "a", "name": "nap", "arguments": {"seconds": 0.5}},
            {"id": "b", "name": "echo", "arguments": {"text": "after a"}}]
    records, _, _, _ = _timed_run(tmp_path, rows, "--tools", SPEC, "--workers", "1")
    a, b = records
    assert a["worker_pid"] == b["worker_pid"]
    assert b["started_at"] >= a["started_at"] + a["duration_s"] - 0.01, records


@pytest.mark.parametrize("where", ["sequential", "inline"])
def test_a_call_run_in_the_toolfork_process_has_no_worker_pid(tmp_path: Path, where: str) -> None:
    if where == "sequential":
        rows = [{"id": "a", "name": "echo", "arguments": {"text": "x"}}]
        args = ("--tools", SPEC, "--mode", "sequential")
    else:
        rows = [{"id": "a", "name": "echo_here", "arguments": {"text": "x"}},
                {"id": "b", "name": "echo", "arguments": {"text": "y"}}]
        args = ("--tools", SPEC, "--tools", INLINE_SPEC, "--workers", "1")
    records, before, after, _ = _timed_run(tmp_path, rows, *args)
    assert records[0]["status"] == "ok" and records[0]["worker_pid"] is None, records
    assert before <= records[0]["started_at"] <= after
    if where == "inline":
        assert type(records[1]["worker_pid"]) is int
