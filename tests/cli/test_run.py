"""``toolfork run`` in-process, through ``toolfork.cli.main``: outputs, ordering, failures, exit codes."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import TOOLS_SPEC, read_jsonl, write_jsonl
from toolfork import cli
from toolfork.commands._idset import IdSet
from toolfork.commands._output import RUN_FIELDS
from toolfork.commands.run import Job

RECORD_KEYS = {"id", "name", "status", "output", "error", *RUN_FIELDS}


def run(*args: str) -> int:
    return cli.main(["run", "--workers", "2", "-q", *args])


def test_examples_job_succeeds_in_input_order(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    # No --tools: examples/tools.py sits beside the calls file, which is the documented convention.
    assert cli.main(["run", "examples/calls.jsonl", "-o", str(out), "-q"]) == 0
    calls = [json.loads(line) for line in Path("examples/calls.jsonl").read_text().splitlines()]
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [c["id"] for c in calls]
    assert all(set(r) == RECORD_KEYS and r["status"] == "ok" and r["error"] is None for r in records)
    by_id = {r["id"]: r for r in records}
    assert by_id["toolu_anthropic_1"]["output"]["data"] == 42  # Anthropic tool_use block
    assert by_id["call_openai_1"]["output"]["data"] == 4.0  # OpenAI tool_calls item
    assert any(r["name"] == "crawl" for r in records) and any(r["name"] == "count_primes" for r in records)


def test_order_is_input_order_even_when_later_calls_finish_first(tmp_path: Path) -> None:
    rows = [{"id": f"n{i}", "name": "nap", "arguments": {"seconds": 0.3 if i == 0 else 0.0, "tag": str(i)}}
            for i in range(6)]
    out = tmp_path / "out.jsonl"
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC) == 0
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [f"n{i}" for i in range(6)]
    assert [r["output"]["content"][0]["text"] for r in records][:2] == ["slept 0.3 0", "slept 0.0 1"]


def test_failures_become_records_and_the_run_goes_on(tmp_path: Path) -> None:
    rows: list[Any] = [
        {"id": "ok1", "name": "echo", "arguments": {"text": "hi"}},
        "this is not json",
        {"id": "unknown", "name": "teleport", "arguments": {}},
        {"id": "invalid", "name": "echo", "arguments": {"text": 5, "extra": 1}},
        {"id": "raises", "name": "boom", "arguments": {"message": "kaput"}},
        {"id": "soft", "name": "soft_fail", "arguments": {"reason": "quota"}},
        {"id": "ok1", "name": "echo", "arguments": {"text": "again"}},
        {"id": "noargs", "name": "echo", "arguments": [1]},
        "",
        {"id": "slow", "name": "nap", "arguments": {"seconds": 5}, "timeout": 0.3},
        {"id": "ok2", "name": "echo", "arguments": {"text": "still running"}},
    ]
    out = tmp_path / "out.jsonl"
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC) == 1
    records = read_jsonl(out)
    # One record per non-blank line, in input order; the blank line is skipped.
    assert [r["id"] for r in records] == ["ok1", "line-2", "unknown", "invalid", "raises", "soft", "ok1",
                                          "noargs", "slow", "ok2"]
    assert all(set(r) == RECORD_KEYS for r in records)
    status = [(r["id"], r["status"]) for r in records]
    assert status == [("ok1", "ok"), ("line-2", "error"), ("unknown", "error"), ("invalid", "error"),
                      ("raises", "error"), ("soft", "ok"), ("ok1", "error"), ("noargs", "error"),
                      ("slow", "timeout"), ("ok2", "ok")]
    err = {r["id"] + str(i): r["error"] for i, r in enumerate(records)}
    assert "not valid JSON" in err["line-21"]["message"] and err["line-21"]["type"] == "MalformedCallError"
    assert "unknown tool 'teleport'" in err["unknown2"]["message"] and "echo" in err["unknown2"]["message"]
    assert err["invalid3"]["type"] == "ToolInputError" and "text" in err["invalid3"]["message"]
    assert err["raises4"]["type"] == "RuntimeError" and err["raises4"]["message"] == "kaput"
    assert "duplicate id 'ok1'" in err["ok16"]["message"]
    assert '"arguments" must be a JSON object' in err["noargs7"]["message"]
    assert records[5]["output"]["is_error"] is True  # ok, but the tool reported an error: a failure
    assert records[-1]["output"]["content"][0]["text"] == "still running"


def test_an_error_output_alone_makes_the_exit_code_1(tmp_path: Path) -> None:
    rows = [{"id": "s", "name": "soft_fail", "arguments": {"reason": "no"}}]
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(tmp_path / "o.jsonl"),
               "--tools", TOOLS_SPEC) == 1


def test_stdin_to_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    lines = "".join(json.dumps({"id": f"e{i}", "name": "echo", "arguments": {"text": f"t{i}"}}) + "\n"
                    for i in range(5))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
    assert run("-", "--tools", TOOLS_SPEC) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    got = [(r["id"], r["output"]["content"][0]["text"]) for r in out]
    assert got == [(f"e{i}", f"t{i}") for i in range(5)]


def test_toolkit_by_name_and_several_tool_specs(tmp_path: Path) -> None:
    rows = [{"id": "d", "name": "divide", "arguments": {"a": 1, "b": 4}},
            {"id": "e", "name": "echo", "arguments": {"text": "x"}},
            {"id": "f", "name": "fetch_page", "arguments": {"page": 2, "delay_s": 0}}]
    out = tmp_path / "out.jsonl"
    code = run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--toolkit", "calculator",
               "--tools", "tests.cli.cli_tools:echo", "--tools", "examples/tools.py:fetch_page")
    assert code == 0
    records = read_jsonl(out)
    assert records[0]["output"]["data"] == 0.25 and records[2]["output"]["data"]["page"] == 2


def test_hooks_run_in_the_worker_around_each_call(tmp_path: Path) -> None:
    rows = [{"id": f"h{i}", "name": "hook_count", "arguments": {}} for i in range(4)]
    out = tmp_path / "out.jsonl"
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC,
               "--workers", "1", "--mode", "fork", "--before-child", "tests.cli.cli_tools:count_before") == 0
    counts = [r["output"]["data"]["before"] for r in read_jsonl(out)]
    assert counts == [1, 2, 3, 4]  # one worker: its counter went up once before each call

    code = run(str(write_jsonl(tmp_path / "c2.jsonl", rows[:1])), "-o", str(out), "--tools", TOOLS_SPEC,
               "--mode", "fork", "--after-child", "tests/cli/cli_tools.py:failing_after")
    assert code == 1
    (record,) = read_jsonl(out)
    assert record["status"] == "error" and "after_child hook" in record["error"]["message"]


def test_sequential_mode_and_executor_timeout(tmp_path: Path) -> None:
    rows = [{"id": "a", "name": "echo", "arguments": {"text": "x"}},
            {"id": "b", "name": "nap", "arguments": {"seconds": 3}}]
    out = tmp_path / "out.jsonl"
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC,
               "--mode", "fork", "--timeout", "0.2") == 1
    assert [r["status"] for r in read_jsonl(out)] == ["ok", "timeout"]
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows[:1])), "-o", str(out), "--tools", TOOLS_SPEC,
               "--mode", "sequential") == 0
    assert read_jsonl(out)[0]["status"] == "ok"


def test_a_huge_output_is_one_complete_line(tmp_path: Path) -> None:
    rows = [{"id": "big", "name": "blob", "arguments": {"size": 8_000_000}},
            {"id": "after", "name": "echo", "arguments": {"text": "x"}}]
    out = tmp_path / "out.jsonl"
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC) == 0
    big, after = read_jsonl(out)
    assert len(big["output"]["content"][0]["text"]) == 8_000_000 and after["id"] == "after"


def test_window_of_one_still_runs_everything(tmp_path: Path) -> None:
    rows = [{"id": f"w{i}", "name": "echo", "arguments": {"text": str(i)}} for i in range(30)]
    out = tmp_path / "out.jsonl"
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC,
               "--window", "1") == 0
    assert [r["id"] for r in read_jsonl(out)] == [f"w{i}" for i in range(30)]


def test_many_bad_lines_behind_a_slow_call_keep_their_place(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # More held-back records than the feeder keeps before it waits: order must still be exact, and
    # the records held in memory never exceed the bound. The general path's Job (the line lane's bound
    # is tested in test_run_lane.py).
    monkeypatch.setenv("TOOLFORK_LINE_LANE", "0")
    peak = [0]
    hold_or_write = Job._hold_or_write

    def spy(self: Job, record: dict[str, Any], lineno: int) -> None:
        hold_or_write(self, record, lineno)
        peak[0] = max(peak[0], self.owed_records)

    monkeypatch.setattr(Job, "_hold_or_write", spy)
    rows: list[Any] = [{"id": "slow", "name": "nap", "arguments": {"seconds": 0.5}}]
    rows += [f"bad {i}" for i in range(1500)]
    rows += [{"id": "last", "name": "echo", "arguments": {"text": "x"}}]
    out = tmp_path / "out.jsonl"
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC) == 1
    ids = [r["id"] for r in read_jsonl(out)]
    assert ids == ["slow", *[f"line-{i}" for i in range(2, 1502)], "last"]
    assert peak[0] == Job.max_owed_records == 1024


# ------------------------------------------------------------------------------------------ resume


def test_resume_skips_done_ids_and_cuts_a_partial_last_line(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "name": "echo", "arguments": {"text": str(i)}} for i in range(6)]
    calls = write_jsonl(tmp_path / "c.jsonl", rows)
    out = tmp_path / "out.jsonl"
    done = [{"id": "r0", "name": "echo", "status": "ok", "output": None, "error": None, "duration_s": 0},
            {"id": "r2", "name": "echo", "status": "ok", "output": None, "error": None, "duration_s": 0}]
    out.write_text("".join(json.dumps(d) + "\n" for d in done) + '{"id": "r3", "name": "ec')
    assert run(str(calls), "-o", str(out), "--tools", TOOLS_SPEC, "--resume", "--missing-journal-ok") == 0
    records = read_jsonl(out)  # every line parses: the partial one is gone
    assert [r["id"] for r in records] == ["r0", "r2", "r1", "r3", "r4", "r5"]
    # Resuming a finished job does nothing and still reports success.
    assert run(str(calls), "-o", str(out), "--tools", TOOLS_SPEC, "--resume") == 0
    assert len(read_jsonl(out)) == 6


def test_resume_exit_code_counts_failures_from_the_earlier_run(tmp_path: Path) -> None:
    rows = [{"id": "a", "name": "echo", "arguments": {"text": "x"}}]
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": "z", "name": "boom", "status": "error", "output": None,
                               "error": {"type": "RuntimeError", "message": "m", "traceback": ""},
                               "duration_s": 0}) + "\n")
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC,
               "--resume", "--missing-journal-ok") == 1


def test_without_resume_the_output_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old content\n")
    rows = [{"id": "a", "name": "echo", "arguments": {"text": "x"}}]
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC) == 0
    assert [r["id"] for r in read_jsonl(out)] == ["a"]


# ------------------------------------------------------------------------------------------ usage errors


@pytest.mark.parametrize(("args", "message"), [
    (["missing.jsonl", "--tools", TOOLS_SPEC], "cannot read 'missing.jsonl': No such file"),
    (["{calls}", "--tools", "tests/cli/cli_tools.py:NOPE"], "has no attribute 'NOPE'"),
    (["{calls}", "--tools", "tests/cli/cli_tools.py:NOT_A_TOOL"], "cannot use 'nope' as a tool"),
    (["{calls}", "--toolkit", "abacus"], "unknown toolkit"),
    (["{calls}"], "no tools: pass --tools MODULE:ATTR or --toolkit NAME"),
    (["-", "--tools", TOOLS_SPEC, "--resume"], "--resume needs -o OUT.jsonl"),
    (["{calls}", "-o", "{calls}", "--tools", TOOLS_SPEC], "is the input file"),
    (["{calls}", "--tools", TOOLS_SPEC, "--before-child", "tests.cli.cli_tools:NOT_CALLABLE"],
     "--before-child .* is not callable"),
    (["{calls}", "--tools", TOOLS_SPEC, "--mode", "fork", "--address", "127.0.0.1:1"],
     "--address is for --mode ray"),
    (["{calls}", "-o", "{tmp}/no/such/dir/out.jsonl", "--tools", TOOLS_SPEC], "cannot write"),
    (["--tools", TOOLS_SPEC], "CALLS.jsonl is missing"),
])
def test_usage_errors_exit_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             args: list[str], message: str) -> None:
    calls = write_jsonl(tmp_path / "calls.jsonl", [{"id": "a", "name": "echo", "arguments": {"text": "x"}}])
    argv = [a.format(calls=calls, tmp=tmp_path) for a in args]
    assert run(*argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolfork run: error: ")
    assert re.search(message, err), err


@pytest.mark.parametrize("args", [["--workers", "0"], ["--timeout", "-1"], ["--mode", "threads"],
                                  ["--window", "x"]])
def test_bad_options_are_argparse_errors_with_status_2(args: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "calls.jsonl", *args] if args else ["run"]
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_id_set_grows_and_remembers_every_id() -> None:
    ids = IdSet()
    for i in range(50_000):
        assert ids.add(f"id-{i}")
    assert len(ids) == 50_000
    assert all(f"id-{i}" in ids for i in range(0, 50_000, 7))
    assert not any(f"other-{i}" in ids for i in range(5_000))
    assert not ids.add("id-123") and len(ids) == 50_000


def test_sequential_fallback_is_announced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TOOLFORK_MODE", "sequential")
    rows = [{"id": "a", "name": "echo", "arguments": {"text": "x"}}]
    calls = write_jsonl(tmp_path / "c.jsonl", rows)
    assert cli.main(["run", str(calls), "-o", str(tmp_path / "o.jsonl"), "--tools", TOOLS_SPEC]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert "sequential mode (fork disabled by the user (TOOLFORK_MODE=sequential))" in first


def test_a_bad_line_that_also_reuses_an_id_says_both(tmp_path: Path) -> None:
    rows = [{"id": "a", "name": "echo", "arguments": {"text": "x"}}, {"id": "a", "arguments": {}}]
    out = tmp_path / "out.jsonl"
    assert run(str(write_jsonl(tmp_path / "c.jsonl", rows)), "-o", str(out), "--tools", TOOLS_SPEC) == 1
    second = read_jsonl(out)[1]
    assert second["id"] == "a"
    expected = 'line 2: "name" missing; its id \'a\' is also used by an earlier line'
    assert second["error"]["message"] == expected


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_fork_workers_write_the_ok_lines_and_the_host_only_the_rest(
        mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In fork mode the host writes an ok result's line as its worker encoded it: the host encodes only
    failures and bad lines; the file is the same in both modes."""
    from toolfork.commands import _output

    encoded_here: list[str] = []  # a worker appends to its own copy of this list, not to ours
    real = _output.encode_record

    def counting(record: dict[str, Any]) -> Any:
        encoded_here.append(str(record.get("id")))
        return real(record)

    monkeypatch.setattr(_output, "encode_record", counting)
    calls = write_jsonl(tmp_path / "calls.jsonl", [
        *({"id": f"ok{i}", "name": "echo", "arguments": {"text": f"é {i}"}} for i in range(6)),
        {"id": "err", "name": "boom", "arguments": {"message": "kaput"}},
        {"id": "soft", "name": "soft_fail", "arguments": {"reason": "nothing there"}},
        "{not json",
    ])
    out = tmp_path / f"out-{mode}.jsonl"
    assert run(str(calls), "-o", str(out), "--tools", TOOLS_SPEC, "--mode", mode) == 1  # failures inside
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [*(f"ok{i}" for i in range(6)), "err", "soft", "line-9"]
    assert [r["output"]["content"][0]["text"] for r in records[:6]] == [f"é {i}" for i in range(6)]
    assert (records[6]["status"], records[7]["output"]["is_error"], records[8]["status"]) == ("error", True, "error")
    expected_here = ["err", "soft", "line-9"] if mode == "fork" else [r["id"] for r in records]
    assert sorted(encoded_here) == sorted(expected_here)
