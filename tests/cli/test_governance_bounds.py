"""Governance values past what the OS or the scheduler can take are refused before any call runs, by
every command (exit 2, naming the value and the bound) and by the Python API (the same message); the
largest values that can be taken run their calls. ``toolfork worker`` takes the governance options of
``run`` and applies them. Every command runs in a real process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import run_process
from tests.cli.test_governance_flags import MEMORY_MESSAGE, TOOLS, most_at_once, run_job, spans_of
from toolfork import Limits, Tool
from toolfork.governance.limits import LimitsError
from toolfork.governance.ratelimit import RateLimit, RateLimitError
from toolfork.tools.errors import ToolDefinitionError

pytestmark = pytest.mark.timeout(120)

ECHO = {"id": "1", "name": "echo", "arguments": {"text": "x"}}

TOO_BIG = [  # (options, words the error names: the value and the bound)
    (["--limits", "memory_mb=17592186044416"], ["memory_mb=17592186044416", "at most 4398046511104"]),
    (["--limits", "file_size_mb=17592186044416"], ["file_size_mb=17592186044416", "at most 4398046511104"]),
    (["--limits", "cpu_s=1e30"], ["cpu_s=1e+30", "at most 1000000000"]),
    (["--limits", "open_files=99999999999999999999"], ["open_files=99999999999999999999", "at most 2147483647"]),
    (["--limits", "processes=4294967296"], ["processes=4294967296", "at most 2147483647"]),
    (["--rate-limit", "echo=0.001/h"], ["echo='0.001/h' is too slow", "2000000 s"]),
    (["--rate-limit", "echo=2000000000/s"], ["echo='2000000000/s' is too fast", "1000000000 calls a second"]),
    (["--rate-limit", "echo=" + "9" * 400 + "/s"], ["finite number"]),
]


@pytest.mark.parametrize(("options", "says"), TOO_BIG)
def test_run_refuses_a_value_past_its_bound_before_any_call(tmp_path: Path, options: list[str],
                                                           says: list[str]) -> None:
    done, records = run_job(tmp_path, [ECHO, {**ECHO, "id": "2"}], *options)
    assert done.returncode == 2, done.stderr
    assert "toolfork run: error:" in done.stderr and "Traceback" not in done.stderr, done.stderr
    for word in says:
        assert word in done.stderr, done.stderr
    assert records == []  # nothing ran, nothing written


def worker(*options: str, stdin: str, tools: str = TOOLS) -> Any:
    return run_process("worker", "--tools", tools, "--workers", "2", *options, stdin=stdin, timeout=90)


@pytest.mark.parametrize(("options", "says"), TOO_BIG[:1] + TOO_BIG[2:3] + TOO_BIG[5:6])
def test_worker_refuses_a_value_past_its_bound_before_any_call(options: list[str], says: list[str]) -> None:
    done = worker(*options, stdin=json.dumps(ECHO) + "\n")
    assert done.returncode == 2, done.stderr
    assert "toolfork worker: error:" in done.stderr and "Traceback" not in done.stderr, done.stderr
    for word in says:
        assert word in done.stderr, done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("bad", [{"memory_mb": 2**44}, {"file_size_mb": 2**42 + 1}, {"cpu_s": 1e30},
                                 {"cpu_s": 1e9 + 1}, {"open_files": 2**31}, {"processes": 2**40}])
def test_the_python_api_refuses_the_same_values(bad: dict[str, Any]) -> None:
    ((name, _),) = bad.items()
    with pytest.raises(LimitsError, match=f"{name}=.*must be at most"):
        Limits(**bad)


@pytest.mark.parametrize("rate", ["0.001/h", "2000000000/s"])
def test_the_python_api_refuses_rates_past_the_bounds(rate: str) -> None:
    with pytest.raises(RateLimitError, match=r"too (slow|fast)"):
        RateLimit.parse(rate)
    with pytest.raises(ToolDefinitionError, match=r"too (slow|fast)"):
        Tool("t", fn=lambda: 1, rate_limit=rate)
    assert RateLimit.parse("0.0018/h").per_second == pytest.approx(0.0018 / 3600)  # inside the bound


def test_the_largest_values_that_can_be_taken_run_their_calls(tmp_path: Path) -> None:
    limits = "memory_mb=4398046511104,file_size_mb=4398046511104,cpu_s=1000000000,open_files=2147483647"
    done, records = run_job(tmp_path, [ECHO], "--limits", limits,
                            "--rate-limit", "echo=0.0018/h")  # one call every 2,000,000 s: the first goes at once
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in records] == ["ok"], (records, done.stderr)


def test_worker_takes_the_governance_options_and_applies_them() -> None:
    rows = [{"id": f"s{i}", "name": "slow", "arguments": {"seconds": 0.3}} for i in range(3)]
    rows.append({"id": "hog", "name": "hog", "arguments": {"mb": 1024}})
    done = worker("--max-concurrency", "slow=1", "--rate-limit", "echo=100/s", "--limits", "memory_mb=256",
                  "--max-calls-per-worker", "5", stdin="".join(json.dumps(r) + "\n" for r in rows))
    assert done.returncode == 0, done.stderr
    records = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert set(records) == {"s0", "s1", "s2", "hog"}
    assert most_at_once(spans_of([records[f"s{i}"] for i in range(3)])) == 1
    assert records["hog"]["status"] == "error" and records["hog"]["error"]["type"] == "LimitExceeded"
    assert MEMORY_MESSAGE in records["hog"]["error"]["message"]
