"""``--sandbox`` on ``toolfork run`` and ``toolfork mcp serve``: every call is sandboxed (a process of
its own per call, its results crossing as data), a tool's own ``sandbox=False`` included; without the
flag the same calls share a warm worker and pickle."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import REPO, child_env, read_jsonl, run_process, write_jsonl

pytestmark = pytest.mark.timeout(120)

TOOLS = "tests/cli/sandbox_tools.py"


def _run(tmp_path: Path, *options: str) -> list[dict[str, Any]]:
    marker = tmp_path / "planted.txt"
    rows = [{"id": "1", "name": "where", "arguments": {}}, {"id": "2", "name": "where", "arguments": {}},
            {"id": "3", "name": "where_unsandboxed", "arguments": {}},
            {"id": "4", "name": "where_unsandboxed", "arguments": {}},
            {"id": "5", "name": "planted", "arguments": {"marker": str(marker)}}]
    calls = write_jsonl(tmp_path / "calls.jsonl", rows)
    out = tmp_path / "out.jsonl"
    run_process("run", str(calls), "-o", str(out), "--tools", TOOLS, "--workers", "1", "-q", *options)
    return read_jsonl(out)


def test_run_sandbox_puts_every_call_in_a_process_of_its_own_and_takes_back_data_only(tmp_path: Path) -> None:
    records = {r["id"]: r for r in _run(tmp_path, "--sandbox")}
    seen = [records[i]["output"]["content"][0]["text"].split() for i in "1234"]
    assert len({token for _, token in seen}) == 4, seen  # one process per call, the sandbox=False tool too
    assert {pid for pid, _ in seen} == {"1"}, seen  # each the first process of a PID namespace of its own
    assert records["5"]["status"] == "error" and "Planted" in records["5"]["error"]["message"]
    assert "not data" in records["5"]["error"]["message"]
    assert not (tmp_path / "planted.txt").exists()


def test_run_without_sandbox_shares_the_warm_worker(tmp_path: Path) -> None:
    records = {r["id"]: r for r in _run(tmp_path)}
    seen = [records[i]["output"]["content"][0]["text"].split() for i in "1234"]
    assert len({tuple(w) for w in seen}) == 1 and seen[0][0] != "1", seen  # one warm worker, the host's PIDs


def test_mcp_serve_sandbox_sandboxes_every_call(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client, StdioServerParameters

    marker = tmp_path / "planted.txt"
    params = StdioServerParameters(command=sys.executable, args=["-m", "toolfork", "mcp", "serve", "--tools", TOOLS,
                                                                 "--workers", "1", "--sandbox"],
                                   env=child_env(), cwd=str(REPO))

    async def go() -> tuple[list[Any], Any]:
        async with Client(params) as client:
            pids = [await client.call_tool(name, {}) for name in ("where", "where", "where_unsandboxed")]
            return pids, await client.call_tool("planted", {"marker": str(marker)})

    pids, planted = asyncio.run(asyncio.wait_for(go(), 90))
    seen = [r.content[0].text.split() for r in pids]
    assert len({token for _, token in seen}) == 3 and {pid for pid, _ in seen} == {"1"}, seen
    assert planted.is_error and "not data" in planted.content[0].text
    assert not marker.exists()
