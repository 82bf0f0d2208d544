"""``toolfork mcp serve`` with clients no one here wrote: the SDK's client (stdio and streamable HTTP)
and the MCP Inspector CLI from npm.

One stdio server (``tests/mcp/served_tools.py``, timeout 3 s, 4 workers) serves most of the module; its
session is held by the connector's loop thread (``toolfork.mcp.host.Host``), which the tests drive
with the SDK's own client calls.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.mcp.conftest import INSPECTOR, ROOT, alive, python_env
from toolfork.mcp.host import Host, ServerTarget

pytestmark = pytest.mark.xdist_group("mcp_server")  # one worker: the module shares its server

SERVE = [sys.executable, "-m", "toolfork", "mcp", "serve", "--tools", "tests/mcp/served_tools.py"]


@pytest.fixture(scope="module")
def server(track: Any) -> Iterator[Host]:
    host = Host(ServerTarget(SERVE[0], [*SERVE[1:], "--timeout", "3", "--workers", "4"],
                             {"PYTHONPATH": str(ROOT)}, str(ROOT), None, None))
    host.run(host.session(), 60)
    track()
    yield host
    host.close()


def call(host: Host, name: str, arguments: dict[str, Any], progress: Any = None) -> Any:
    async def go() -> Any:
        client = await host.session()
        return await client.session.call_tool(name, arguments, progress_callback=progress)

    return host.run(go(), 60)


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_tools_are_listed_with_schema_and_metadata(server: Host) -> None:
    from toolfork.mcp.options import ListLimits

    tools = {t.name: t for t in server.run(server.list_tools(ListLimits()), 30)}
    assert {"add", "count", "spin", "crash", "exit_now", "hang", "fail"} <= set(tools)
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert add.title == "Add"
    assert add.annotations is not None and add.annotations.read_only_hint is True
    assert add.output_schema is not None and add.output_schema["properties"]["total"]["type"] == "integer"
    result = call(server, "add", {"a": 2, "b": 3})
    assert not result.is_error and result.structured_content == {"total": 5}


def test_progress_is_sent_when_the_client_gave_a_token(server: Host) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    result = call(server, "count", {"n": 3}, progress)
    assert text(result) == "done"
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


def test_concurrent_cpu_bound_calls_use_every_core(server: Host) -> None:
    async def four() -> list[Any]:
        client = await server.session()
        return list(await asyncio.gather(*[client.session.call_tool("spin", {"seconds": 0.3}) for _ in range(4)]))

    call(server, "spin", {"seconds": 0.01})  # warm
    results = server.run(four(), 60)
    assert not any(r.is_error for r in results), [text(r) for r in results]
    spans = [r.structured_content for r in results]
    assert len({s["pid"] for s in spans}) == 4  # four worker processes
    # Ran at once, not one after the other: every call started before the first one ended. (Wall time
    # is not asserted: on a loaded machine 0.3 s of CPU can take any time; bench/results/mcp.md has it.)
    first_end = min(s["end"] for s in spans)
    assert all(s["start"] < first_end for s in spans), spans


def test_tool_failures_are_error_results_and_the_server_keeps_serving(server: Host) -> None:
    crashed = call(server, "crash", {})
    assert crashed.is_error and "SIGSEGV" in text(crashed)
    exited = call(server, "exit_now", {})
    assert exited.is_error and "exited with code 7" in text(exited)
    failed = call(server, "fail", {"message": "no luck"})
    assert failed.is_error and "no luck" in text(failed)
    invalid = call(server, "add", {"a": "x", "b": 1})
    assert invalid.is_error and "Invalid arguments" in text(invalid)
    assert call(server, "add", {"a": 1, "b": 1}).structured_content == {"total": 2}


def test_a_tool_using_stdout_and_stdin_does_not_touch_the_wire(server: Host) -> None:
    result = call(server, "chatty", {})
    assert not result.is_error and text(result) == "read b''"
    assert call(server, "add", {"a": 1, "b": 1}).structured_content == {"total": 2}


def test_unknown_tool_is_a_protocol_error(server: Host) -> None:
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError, match="Unknown tool: 'nope'"):
        call(server, "nope", {})


def test_timeout_kills_the_worker(server: Host, tmp_path: Path) -> None:
    marker = tmp_path / "hang.pid"
    result = call(server, "hang", {"marker": str(marker)})
    assert result.is_error and "timed out" in text(result)
    _gone(int(marker.read_text()))
    assert not call(server, "add", {"a": 1, "b": 2}).is_error


def test_cancelled_notification_stops_the_call_worker(server: Host, tmp_path: Path) -> None:
    marker = tmp_path / "cancel.pid"

    async def start_then_cancel() -> None:
        client = await server.session()
        task = asyncio.ensure_future(client.session.call_tool("block", {"marker": str(marker)}))
        deadline = time.monotonic() + 10
        while not marker.exists():
            assert time.monotonic() < deadline, "the call never started"
            await asyncio.sleep(0.02)
        task.cancel()  # the SDK sends notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await task

    server.run(start_then_cancel(), 30)
    pid = int(marker.read_text())
    deadline = time.monotonic() + 10  # the tool's own timeout is 60 s: only the cancellation ends it
    while alive(pid):
        assert time.monotonic() < deadline, "the cancelled call's worker is still running"
        time.sleep(0.02)
    assert not call(server, "add", {"a": 1, "b": 2}).is_error


def _gone(pid: int, within: float = 10) -> None:
    deadline = time.monotonic() + within
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.02)


def _tree(pid: int) -> list[int]:
    try:
        return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return [pid]


def _wait_for_pool(pid: int) -> list[int]:
    deadline = time.monotonic() + 30
    while len(_tree(pid)) < 3:  # the server, its pool's template and workers
        assert time.monotonic() < deadline, "the server never started its worker pool"
        time.sleep(0.05)
    return _tree(pid)


@pytest.mark.parametrize("how", ["stdin-closed", "sigterm", "ctrl-c"])
def test_server_exits_leaving_no_process(how: str) -> None:
    proc = subprocess.Popen([*SERVE, "--workers", "2"], cwd=ROOT, env=python_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        tree = _wait_for_pool(proc.pid)
        if how == "stdin-closed":
            assert proc.stdin is not None
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        assert proc.wait(15) == 0
        for pid in tree:
            _gone(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_streamable_http_transport() -> None:
    proc = subprocess.Popen([*SERVE, "--http", "127.0.0.1:0", "--workers", "2"], cwd=ROOT, env=python_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    host = None
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # the announcement, after whatever the libraries logged first
            seen.append(line)
            if "listening on http://" in line or len(seen) > 50:
                break
        assert "listening on http://127.0.0.1:" in seen[-1], seen
        url = seen[-1].rsplit(" ", 1)[-1].strip()
        host = Host(ServerTarget(None, [], None, None, url, None))
        result = call(host, "add", {"a": 20, "b": 22})
        assert result.structured_content == {"total": 42}
        crashed = call(host, "crash", {})
        assert crashed.is_error and "SIGSEGV" in text(crashed)
        host.close()
        tree = _tree(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        for pid in tree:
            _gone(pid)
    finally:
        if host is not None:
            host.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_mcp_inspector_cli_as_client(npm_tools: Path) -> None:
    base = ["node", str(INSPECTOR), "--cli", *SERVE, "--workers", "2"]
    env = {**python_env(), "MCP_CATALOG_PATH": str(npm_tools / "catalog.json")}
    listed = subprocess.run([*base, "--method", "tools/list"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=90)
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
    assert {"add", "count", "crash"} <= names
    called = subprocess.run([*base, "--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2",
                             "--tool-arg", "b=3"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert called.returncode == 0, called.stderr
    out = json.loads(called.stdout)
    assert out["structuredContent"] == {"total": 5} and out["isError"] is False
