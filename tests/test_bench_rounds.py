"""The benchmark a user runs on their own work: interleaved rounds with the spread of every cell, a
warning when the rounds disagree, their own tools and calls timed on several executors, a summary that
fits 100 columns with the missing executors on one line, and output that never lands in a checkout.

Real runs on tiny workloads (threads and toolfork's sequential mode where the executor does not
matter, so the runs stay short); nothing here asserts a speed.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolfork.bench import BenchConfig, run_benchmark
from toolfork.bench.config import QUICK_WORKLOADS
from toolfork.bench.harness import validate
from toolfork.bench.outdir import default_out_dir
from toolfork.bench.peers import not_run
from toolfork.bench.summary import summary
from toolfork.cli import main as cli_main

pytestmark = [pytest.mark.timeout(300)]

WIDTH = 100


def _narrow(text: str) -> None:
    """Every line of the summary fits 100 columns, except the paths of the written files."""
    lines = text.splitlines()
    paths_from = next((i for i, line in enumerate(lines) if line.startswith("full table")), len(lines))
    for line in lines[:paths_from]:
        assert len(line) <= WIDTH, line


# --- rounds and spread ----------------------------------------------------------------------------


def test_rounds_interleave_the_executors_in_rotating_order() -> None:
    seen: list[str] = []
    config = BenchConfig.tiny()
    config.rounds = 3
    results = run_benchmark(config, ["threads", "toolfork-sequential"], ["small", "tiny"],
                            isolation="executor", progress=seen.append)
    order = [re.sub(r"^\[\d+/\d+\] (round \d+: \S+ x \S+):.*$", r"\1", line) for line in seen]
    assert order == [
        "round 1: threads x small", "round 1: toolfork-sequential x small",
        "round 1: toolfork-sequential x tiny", "round 1: threads x tiny",
        "round 2: toolfork-sequential x small", "round 2: threads x small",
        "round 2: threads x tiny", "round 2: toolfork-sequential x tiny",
        "round 3: threads x small", "round 3: toolfork-sequential x small",
        "round 3: toolfork-sequential x tiny", "round 3: threads x tiny",
    ]
    assert results["meta"]["rounds"] == 3
    for ex in ("threads", "toolfork-sequential"):
        cell = results["cells"][ex]["tiny"]
        assert cell["status"] == "ok" and cell["rounds"] == 3
        low, mid, high = cell["spread"]["tiny_us_per_call"]
        assert 0 < low <= mid <= high
        assert cell["metrics"]["tiny_us_per_call"] == mid
    # One runner per executor served all three rounds (isolation "executor").
    assert sorted(s["executor"] for s in results["sessions"]) == ["threads", "toolfork-sequential"]
    _narrow(summary(results))


# --- your own tools and calls ---------------------------------------------------------------------

USER_TOOLS = textwrap.dedent(
    '''
    import os
    import time

    from helpers import offset
    from toolfork import tool


    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers after a short wait, like a tool calling a service."""
        time.sleep(0.01)
        if a < 0:
            raise ValueError("no negative numbers")
        return a + b + offset()


    @tool
    def first_batch_slow(marker: str) -> str:
        """Slow on the first round only: every call appends a byte to the marker file, and the calls
        of the first batch (the first 4 bytes) sleep."""
        with open(marker, "ab") as fh:
            fh.write(b"x")
        if os.path.getsize(marker) <= 4:
            time.sleep(0.5)
        return "done"
    '''
)


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project: tools.py importing a helper module next to it, and calls files, in a
    directory that is not a checkout (the output goes under it by default)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "tools.py").write_text(USER_TOOLS)
    (work / "helpers.py").write_text("def offset() -> int:\n    return 0\n")
    lines = [json.dumps({"id": f"c{i}", "name": "add", "arguments": {"a": i, "b": 1}}) for i in range(6)]
    lines.insert(2, "this is not json")
    lines.append(json.dumps({"id": "neg", "name": "add", "arguments": {"a": -1, "b": 1}}))
    lines.append(json.dumps({"type": "tool_use", "id": "u1", "name": "nope", "input": {}}))
    (work / "calls.jsonl").write_text("\n".join(lines) + "\n")
    marker = work / "marker"
    slow = [json.dumps({"name": "first_batch_slow", "arguments": {"marker": str(marker)}}) for _ in range(4)]
    (work / "noisy.jsonl").write_text("\n".join(slow) + "\n")
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))
    return work


def test_your_calls_are_timed_on_every_executor_side_by_side(
    user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = user_dir / "out"
    code = cli_main(["bench", "--calls", "calls.jsonl", "--executors", "toolfork,threads,pebble",
                     "--rounds", "2", "--workers", "2", "--out", str(out), "--no-plots"])
    assert code == 0
    data = json.loads((out / "latest.json").read_text())
    assert data["workloads"] == ["user"]
    assert data["meta"]["user"]["calls"] == 7  # the bad line and the unknown tool are left out
    assert data["meta"]["user"]["workers"] == 2
    skipped = data["meta"]["user"]["skipped_lines"]
    assert any("line 3: not valid JSON" in s for s in skipped)
    assert any("unknown tool 'nope'" in s for s in skipped)
    for ex in ("toolfork", "threads", "pebble"):
        cell = data["cells"][ex]["user"]
        assert cell["status"] == "ok", cell
        assert cell["rounds"] == 2
        assert cell["metrics"]["user_ok"] == 6  # the call with a negative number fails everywhere
        assert "no negative numbers" in cell["metrics"]["user_first_not_ok"]
        assert cell["metrics"]["user_wall_s"] > 0
    printed = capsys.readouterr().out
    _narrow(printed)
    assert "your 7 calls, one batch: wall (s)" in printed
    assert "left out 2 call line(s): line 3: not valid JSON" in printed
    for ex in ("toolfork", "threads", "pebble"):
        assert ex in printed


def test_a_cell_whose_rounds_disagree_is_flagged_wide(user_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = user_dir / "out"
    code = cli_main(["bench", "--tools", "tools.py", "--calls", "noisy.jsonl", "--executors", "threads",
                     "--rounds", "3", "--out", str(out), "--no-plots"])
    assert code == 0
    cell = json.loads((out / "latest.json").read_text())["cells"]["threads"]["user"]
    _low, mid, high = cell["spread"]["user_wall_s"]
    assert high >= 0.5 > mid  # the first round slept, the other two did not
    assert "user_wall_s" in cell["wide"]
    printed = capsys.readouterr().out
    _narrow(printed)
    assert "WARNING: wide spread" in printed
    assert "threads user_wall_s" in printed
    assert re.search(r"\d ±\d+%!", printed)
    assert "!" in (out / "latest.md").read_text().split("| your 4 calls, one batch: wall (s) |")[1].splitlines()[0]


def test_a_steady_cell_is_not_flagged(user_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (user_dir / "steady.jsonl").write_text(json.dumps({"name": "add", "arguments": {"a": 1, "b": 2}}) + "\n")
    config = BenchConfig.tiny()
    config.rounds = 2
    config.wide_spread = 1e9  # no spread is that wide: the warning must stay away
    from toolfork.commands.bench import read_user_work

    results = run_benchmark(config, ["threads"], user=read_user_work([], "steady.jsonl"), isolation="executor")
    assert results["cells"]["threads"]["user"]["wide"] == []
    assert "WARNING: wide spread" not in summary(results)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--calls", "missing.jsonl", "--tools", "tools.py"], "cannot read 'missing.jsonl'"),
        (["--calls", "calls.jsonl", "--tools", "nowhere.py"], "toolfork bench: 'nowhere.py': no such file"),
        (["--tools", "tools.py"], "--tools needs --calls"),
        (["--calls", "calls.jsonl", "--rounds", "0"], None),
    ],
)
def test_bad_user_input_is_named(
    user_dir: Path, argv: list[str], message: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = cli_main(["bench", "--executors", "threads", *argv])
    except SystemExit as exc:  # argparse refuses --rounds 0 itself
        code = int(exc.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    assert (message or "expected a positive integer, got '0'") in err
    assert not (user_dir / "toolfork-bench").exists()


# --- summary --------------------------------------------------------------------------------------


def _synthetic(executors: list[str], not_run_: dict[str, str]) -> dict[str, Any]:
    metric = {"key": "tiny_us_per_call", "workload": "tiny", "label": "tiny: 1000 trivial calls, per call",
              "unit": "us", "better": "lower", "ideal": None, "target": None}
    cells = {
        ex: {"tiny": {"status": "ok", "metrics": {"tiny_us_per_call": 123456.789},
                      "spread": {"tiny_us_per_call": [1.0, 123456.789, 999999.0]}, "wide": ["tiny_us_per_call"]}}
        for ex in executors
    }
    return {
        "meta": {"profile": "quick", "rounds": 3, "duration_s": 12.0, "config": {"wide_spread": 0.3},
                 "load": {"others_share": 0.9, "steal_share": 0.0, "load_start": 17.0, "load_end": 20.0,
                          "warnings": ["other processes used 90% of the CPU during the run"]}},
        "executors": executors,
        "workloads": ["tiny"],
        "metrics": [metric],
        "cells": cells,
        "not_run": not_run_,
    }


def test_summary_fits_100_columns_whatever_the_number_of_executors() -> None:
    executors = [f"an-executor-with-a-long-name-{i}" for i in range(11)]
    text = summary(_synthetic(executors, {}))
    _narrow(text)
    for ex in executors:  # every executor is still shown, in as many tables as it takes
        assert ex in text
    assert "WARNING: a loaded machine: other processes used 90% of the CPU" in text


def test_missing_executors_are_one_line() -> None:
    missing = {"ray": "not installed", "pebble": "not installed", "toolfork-ray": "left out of --quick"}
    text = summary(_synthetic(["toolfork"], missing))
    lines = [line for line in text.splitlines() if "not installed" in line or "left out" in line]
    assert lines == ["not run: ray, pebble (not installed); toolfork-ray (left out of --quick)"]


def test_an_executor_that_is_not_installed_is_left_out_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = tmp_path / "bench_missing_peer.py"
    mod.write_text(
        "from toolfork.bench.peers import ThreadsPeer\n\n"
        "class MissingPeer(ThreadsPeer):\n"
        "    name = 'missing'\n"
        "    requires = ('toolfork_no_such_module_anywhere',)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    results = run_benchmark(BenchConfig.tiny(), ["bench_missing_peer:MissingPeer", "threads"], ["small"],
                            isolation="executor")
    assert results["executors"] == ["threads"]
    assert results["not_run"] == {"missing": "not installed"}
    assert "not run: missing (not installed)" in summary(results)


def test_quick_runs_the_headline_workloads_without_the_slow_starters() -> None:
    specs, workloads = validate(None, None, "quick")
    assert workloads == list(QUICK_WORKLOADS)
    assert "ray" not in specs and "toolfork-ray" not in specs and "toolfork" in specs
    assert not_run(specs, quick=True)["ray"] in ("not installed", "left out of --quick: slow to start; name "
                                                 "them in --executors")
    assert BenchConfig.quick().rounds >= 3


# --- where the files go ---------------------------------------------------------------------------


def test_default_output_is_never_inside_a_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    checkout = tmp_path / "repo"
    (checkout / ".git").mkdir(parents=True)  # a worktree has a .git file; either marks a checkout
    deep = checkout / "src" / "pkg"
    deep.mkdir(parents=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    for where in (checkout, deep):
        out = default_out_dir(where)
        assert out.parent == tmp_path / "cache" / "toolfork" / "bench"
    out = default_out_dir(plain)
    assert out.parent == plain / "toolfork-bench"
    out.mkdir(parents=True)
    assert default_out_dir(plain) != out  # a second run the same second gets a directory of its own


def test_cli_writes_into_the_cache_when_run_in_a_checkout(
    user_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (user_dir / ".git").write_text("gitdir: elsewhere\n")
    (user_dir / "bench" / "results").mkdir(parents=True)
    before = sorted(p.name for p in user_dir.iterdir())
    assert cli_main(["bench", "--calls", "calls.jsonl", "--executors", "threads", "--rounds", "1",
                     "--no-plots"]) == 0
    # (Python's own cache of the imported tools.py may appear: it is not the bench's output)
    assert sorted(p.name for p in user_dir.iterdir() if p.name != "__pycache__") == before
    assert not any((user_dir / "bench" / "results").iterdir())
    (written,) = (tmp_path / "cache" / "toolfork" / "bench").iterdir()
    assert (written / "latest.json").is_file()
    assert str(written / "latest.md") in capsys.readouterr().out


def test_cli_writes_under_the_current_directory_elsewhere(user_dir: Path) -> None:
    assert cli_main(["bench", "--calls", "calls.jsonl", "--executors", "threads", "--rounds", "1",
                     "--no-plots"]) == 0
    (written,) = (user_dir / "toolfork-bench").iterdir()
    assert json.loads((written / "latest.json").read_text())["cells"]["threads"]["user"]["status"] == "ok"
    assert os.path.isfile(written / "latest.md")


def test_an_executor_whose_setup_fails_is_tried_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bench_broken_peer.py").write_text(
        "from toolfork.bench.peers import ThreadsPeer\n\n"
        "class BrokenPeer(ThreadsPeer):\n"
        "    name = 'broken'\n\n"
        "    @classmethod\n"
        "    def setup_session(cls):\n"
        "        raise RuntimeError('no cluster here')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    config = BenchConfig.tiny()
    config.rounds = 2
    results = run_benchmark(config, ["bench_broken_peer:BrokenPeer", "threads"], ["small", "tiny"],
                            isolation="executor")
    for w in ("small", "tiny"):
        cell = results["cells"]["broken"][w]
        assert cell["status"] == "error"
        assert "setup failed: RuntimeError: no cluster here" in cell["detail"]
        assert cell["rounds_failed"] == 2
        assert results["cells"]["threads"][w]["status"] == "ok"
    assert [s["outcome"] for s in results["sessions"] if s["executor"].endswith("BrokenPeer")] == ["setup_failed"]
