"""The resource-governance options of ``toolfork run`` and ``toolfork mcp serve`` (``--limits``,
``--max-concurrency``, ``--rate-limit``, ``--concurrency``, ``--max-calls-per-worker``,
``--max-worker-memory-mb``), each in a real process of the command line.

Caps and rates are checked from the timestamps the calls write themselves (``time.monotonic()``,
one clock for the whole machine): how many ran at once, how far apart they started. Only lower bounds
on time are asserted, never speed: a loaded machine may run anything slower.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, child_env, read_jsonl, run_process, write_jsonl

pytestmark = pytest.mark.timeout(90)  # every test here is a few seconds; this is the hang guard

TOOLS = "tests/cli/governance_tools.py"
GROUPED = "tests/cli/governance_tools.py:GROUPED"
MEMORY_MESSAGE = "memory limit of 256 MB exceeded"


def run_job(tmp_path: Path, rows: list[dict[str, Any]], *options: str,
            tools: str = TOOLS) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    calls = write_jsonl(tmp_path / "calls.jsonl", rows)
    out = tmp_path / "out.jsonl"
    done = run_process("run", str(calls), "-o", str(out), "--tools", tools, "--workers", "4", "-q", *options)
    return done, read_jsonl(out) if out.exists() else []


def most_at_once(spans: list[dict[str, float]]) -> int:
    """The most calls running at one moment. A call counts from its start to its end stamp, both taken
    inside its slot, so this can only undercount the slots held at once, never overcount them."""
    return max(sum(1 for other in spans if other["start"] <= s["start"] < other["end"]) for s in spans)


def spans_of(records: list[dict[str, Any]]) -> list[dict[str, float]]:
    assert all(r["status"] == "ok" for r in records), records
    return [r["output"]["data"] for r in records]


# ----------------------------------------------------------------------------- toolfork run


def test_a_call_past_the_memory_limit_fails_alone(tmp_path: Path) -> None:
    rows = [{"id": "before", "name": "echo", "arguments": {"text": "a"}},
            {"id": "hog", "name": "hog", "arguments": {"mb": 2048}},
            {"id": "small", "name": "hog", "arguments": {"mb": 16}},
            {"id": "after", "name": "echo", "arguments": {"text": "b"}}]
    done, records = run_job(tmp_path, rows, "--limits", "memory_mb=256")
    assert done.returncode == 1, done.stderr  # a call failed
    by_id = {r["id"]: r for r in records}
    assert [r["id"] for r in records] == ["before", "hog", "small", "after"]
    hog = by_id["hog"]
    assert hog["status"] == "error" and hog["error"]["type"] == "LimitExceeded", hog
    assert MEMORY_MESSAGE in hog["error"]["message"], hog
    assert by_id["small"]["status"] == "ok" and by_id["small"]["output"]["data"] == 16 * 1024 * 1024
    assert [by_id[i]["status"] for i in ("before", "after")] == ["ok", "ok"]


def test_without_limits_the_same_call_is_not_limited(tmp_path: Path) -> None:
    # The counterpart of the test above, with a size any test machine has: no --limits, no limit.
    done, records = run_job(tmp_path, [{"id": "h", "name": "hog", "arguments": {"mb": 300}}])
    assert done.returncode == 0, done.stderr
    assert records[0]["status"] == "ok" and records[0]["output"]["data"] == 300 * 1024 * 1024


def test_max_concurrency_caps_the_calls_of_a_tool_at_once(tmp_path: Path) -> None:
    rows = [{"id": f"s{i}", "name": "slow", "arguments": {"seconds": 0.6}} for i in range(8)]
    # Four workers could run four at once; the cap lets two.
    done, records = run_job(tmp_path, rows, "--max-concurrency", "slow=2")
    assert done.returncode == 0, done.stderr
    assert [r["id"] for r in records] == [f"s{i}" for i in range(8)]  # input order still
    assert most_at_once(spans_of(records)) <= 2


def test_concurrency_caps_a_group_of_tools(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "name": "query", "arguments": {"seconds": 0.6}} for i in range(6)]
    done, records = run_job(tmp_path, rows, "--concurrency", "db=2", tools=GROUPED)
    assert done.returncode == 0, done.stderr
    assert most_at_once(spans_of(records)) <= 2


def test_rate_limit_spaces_the_starts_of_a_tool(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "name": "slow", "arguments": {}} for i in range(10)]
    done, records = run_job(tmp_path, rows, "--rate-limit", "slow=5/s")
    assert done.returncode == 0, done.stderr
    starts = sorted(s["start"] for s in spans_of(records))
    # 5/s lets one call out every 0.2 s: ten starts span 1.8 s at least (lower bound only, with margin).
    assert starts[-1] - starts[0] >= 1.4, starts


@pytest.mark.parametrize(("flag", "value"), [("--max-calls-per-worker", "1"), ("--max-worker-memory-mb", "1")])
def test_worker_recycling_gives_every_call_a_fresh_worker(tmp_path: Path, flag: str, value: str) -> None:
    # Every call leaves 4 MiB of the worker's own memory (over the 1 MiB budget) and is its one call: each
    # call is served by a new process.
    rows = [{"id": f"p{i}", "name": "slow", "arguments": {"keep_mb": 4}} for i in range(6)]
    done, records = run_job(tmp_path, rows, flag, value, "--workers", "2")
    assert done.returncode == 0, done.stderr
    pids = [s["pid"] for s in spans_of(records)]
    assert len(set(pids)) == 6, pids


def test_tool_settings_go_on_copies_of_the_loaded_tools() -> None:
    """A tool loaded by --tools is a module-level object others may share: the option configures a copy."""
    from tests.cli import governance_tools
    from toolfork.commands._governance import add_governance_arguments, govern

    parser = argparse.ArgumentParser()
    add_governance_arguments(parser)
    args = parser.parse_args(["--max-concurrency", "slow=2", "--rate-limit", "echo=3/s", "--limits", "cpu_s=2"])
    tools, options = govern(args, list(governance_tools.TOOLS))
    by_name = {t.name: t for t in tools}
    assert by_name["slow"].max_concurrency == 2 and by_name["echo"].rate_limit == "3/s"
    assert by_name["slow"] is not governance_tools.slow and by_name["hog"] is governance_tools.hog
    assert governance_tools.slow.max_concurrency is None and governance_tools.echo.rate_limit is None
    assert options["limits"].cpu_s == 2 and options["concurrency"] is None


@pytest.mark.parametrize(("options", "says"), [
    (["--limits", "memory_mb=-1"], ["--limits", "memory_mb=-1"]),
    (["--limits", "foo=1"], ["--limits", "unknown limit 'foo'"]),
    (["--limits", "network=maybe"], ["--limits", "network='maybe'"]),
    (["--rate-limit", "t=fast"], ["--rate-limit", "t='fast' is not a rate"]),
    (["--rate-limit", "slow"], ["--rate-limit", "TOOL=VALUE"]),
    (["--max-concurrency", "nosuch=2"], ["--max-concurrency nosuch=2", "no tool is named 'nosuch'",
                                         "echo, hog, slow"]),
    (["--rate-limit", "nosuch=2/s"], ["--rate-limit nosuch=2/s", "no tool is named 'nosuch'"]),
    (["--max-concurrency", "slow=0"], ["--max-concurrency", "slow=0"]),
    (["--max-concurrency", "slow=2", "--max-concurrency", "slow=3"], ["--max-concurrency", "'slow' is given twice"]),
    (["--concurrency", "db=2"], ["--concurrency db=2", "no tool is in concurrency group 'db'"]),
    (["--max-calls-per-worker", "0"], ["--max-calls-per-worker", "'0'"]),
    (["--max-worker-memory-mb", "lots"], ["--max-worker-memory-mb", "'lots'"]),
])
def test_a_bad_option_is_a_usage_error_naming_it(tmp_path: Path, options: list[str], says: list[str]) -> None:
    done, records = run_job(tmp_path, [{"id": "1", "name": "echo", "arguments": {"text": "x"}}], *options)
    assert done.returncode == 2, done.stderr
    assert "toolfork run: error:" in done.stderr and "Traceback" not in done.stderr, done.stderr
    for word in says:
        assert word in done.stderr, done.stderr
    assert records == []  # nothing ran, nothing written


def test_a_group_without_a_cap_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    done, _ = run_job(tmp_path, [{"id": "1", "name": "echo", "arguments": {"text": "x"}}], tools=GROUPED)
    assert done.returncode == 2, done.stderr
    assert "tool 'query' is in concurrency group 'db'" in done.stderr and "--concurrency db=N" in done.stderr


def test_limits_that_cannot_be_enforced_stop_the_job_before_it_starts(tmp_path: Path) -> None:
    # Sequential mode runs calls in the command's own process, where no call can be limited.
    done, records = run_job(tmp_path, [{"id": "1", "name": "echo", "arguments": {"text": "x"}}],
                            "--mode", "sequential", "--limits", "memory_mb=256")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolfork run: error:"), done.stderr
    assert "memory_mb=256 cannot be enforced" in lines[0] and "sequential mode" in lines[0]
    assert records == []


def test_best_effort_limits_run_where_they_cannot_be_enforced(tmp_path: Path) -> None:
    done, records = run_job(tmp_path, [{"id": "1", "name": "echo", "arguments": {"text": "x"}}],
                            "--mode", "sequential", "--limits", "memory_mb=256,enforce=best-effort")
    assert done.returncode == 0, done.stderr
    assert records[0]["status"] == "ok" and "not applied" in done.stderr


# ----------------------------------------------------------------------------- toolfork mcp serve


def _serve_args(*options: str) -> list[str]:
    return ["-m", "toolfork", "mcp", "serve", "--tools", TOOLS, "--workers", "2", "--timeout", "60", *options]


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_mcp_serve_applies_the_limits_to_its_calls() -> None:
    pytest.importorskip("mcp")
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=_serve_args("--limits", "memory_mb=256",
                                                                            "--max-concurrency", "slow=1"),
                                   env=child_env(), cwd=str(REPO))

    async def go() -> tuple[Any, Any, list[Any]]:
        async with Client(params) as client:
            hog = await client.call_tool("hog", {"mb": 2048})
            echo = await client.call_tool("echo", {"text": "still serving"})
            slow = await asyncio.gather(*[client.call_tool("slow", {"seconds": 0.5}) for _ in range(3)])
            return hog, echo, list(slow)

    hog, echo, slow = asyncio.run(asyncio.wait_for(go(), 60))
    assert hog.is_error and MEMORY_MESSAGE in _text(hog), _text(hog)
    assert not echo.is_error and _text(echo) == "still serving"
    assert not any(r.is_error for r in slow), [_text(r) for r in slow]
    assert most_at_once([r.structured_content for r in slow]) == 1


@pytest.mark.parametrize(("options", "env", "says"), [
    (["--limits", "memory_mb=-1"], {}, "argument --limits: memory_mb=-1"),
    (["--limits", "foo=1"], {}, "unknown limit 'foo'"),
    (["--rate-limit", "t=fast"], {}, "t='fast' is not a rate"),
    (["--max-concurrency", "nosuch=2"], {}, "no tool is named 'nosuch'"),
    # Sequential mode (forced here by the environment) cannot limit a call: refused, in one line.
    (["--limits", "memory_mb=256"], {"TOOLFORK_MODE": "sequential"}, "memory_mb=256 cannot be enforced"),
])
def test_mcp_serve_refuses_bad_options_with_a_message(options: list[str], env: dict[str, str], says: str) -> None:
    pytest.importorskip("mcp")
    done = subprocess.run([sys.executable, *_serve_args(*options)], cwd=REPO, env={**child_env(), **env},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "toolfork mcp serve: error:" in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_mcp_serve_app_refuses_per_tool_options() -> None:
    pytest.importorskip("mcp")
    done = subprocess.run([sys.executable, "-m", "toolfork", "mcp", "serve", "--app", "tests/mcp/pool_app.py:app",
                           "--max-concurrency", "add=2"], cwd=REPO, env=child_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--max-concurrency sets tools of --tools/--toolkit" in done.stderr, done.stderr


def test_the_options_are_in_the_help() -> None:
    for command in (["run"], ["mcp", "serve"]):
        done = run_process(*command, "--help")
        assert done.returncode == 0, done.stderr
        for flag in ("--limits SPEC", "--max-concurrency TOOL=N", "--rate-limit TOOL=RATE", "--concurrency GROUP=N",
                     "--max-calls-per-worker N", "--max-worker-memory-mb M"):
            assert flag in done.stdout, (command, flag)
