"""``MCPConnector`` against real MCP servers: one written with the SDK (stdio and streamable HTTP) and
the npm reference server ``@modelcontextprotocol/server-everything``.

One stdio server and one executor serve the whole module (opening a session costs a process start).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import EVERYTHING, ROOT, SDK_SERVER, alive, python_env
from tests.mcp.http_servers import free_port, serving
from toolfork.executor import Executor
from toolfork.executor.types import CallFinished, CallProgress, ToolCall, ToolResult
from toolfork.mcp import MCPConnector
from toolfork.tools.errors import DuplicateToolError

pytestmark = pytest.mark.xdist_group("mcp_connector")  # one worker: the module shares its servers


@pytest.fixture(scope="module")
def cancel_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "cancelled.log"


@pytest.fixture(scope="module")
def sdk(cancel_log: Path, track: Any) -> Iterator[tuple[MCPConnector, Executor]]:
    connector = MCPConnector(SDK_SERVER[0], SDK_SERVER[1:], cwd=str(ROOT),
                             env={"TOOLFORK_TEST_CANCEL_LOG": str(cancel_log)}, label="sdk")
    executor = Executor([connector], workers=6)
    track()
    yield connector, executor
    executor.close()
    connector.close()


def run1(executor: Executor, name: str, arguments: dict[str, Any], **kw: Any) -> ToolResult:
    return executor.run([ToolCall("c", name, arguments, **kw)])[0]


def server_pid(executor: Executor) -> int:
    result = run1(executor, "pid", {})
    assert result.ok, result.error
    assert result.output is not None
    return int(result.output.data["result"])


def test_tools_keep_schema_title_annotations_and_output_schema(sdk: tuple[MCPConnector, Executor]) -> None:
    connector, _ = sdk
    tools = {t.name: t for t in connector.tools()}
    assert {"echo", "add", "nap", "fail", "die", "pid", "media"} <= set(tools)
    echo = tools["echo"]
    assert echo.description == "Give the text back."
    assert echo.to_json_schema()["properties"]["text"]["type"] == "string"
    assert echo.title == "Echo text"  # type: ignore[attr-defined]
    assert echo.annotations == {"readOnlyHint": True, "idempotentHint": True}  # type: ignore[attr-defined]
    assert tools["add"].output_schema["properties"]["total"]["type"] == "integer"  # type: ignore[attr-defined]
    assert "MCPConnector(sdk)" in repr(connector) or "sdk_server" in repr(connector)


def test_arguments_are_validated_against_the_input_schema(sdk: tuple[MCPConnector, Executor]) -> None:
    _, executor = sdk
    result = run1(executor, "add", {"a": "one", "b": 2})
    assert result.status == "error"
    assert result.error is not None and result.error.type == "ToolInputError"
    assert "a" in result.error.message


def test_results_map_onto_tool_output(sdk: tuple[MCPConnector, Executor]) -> None:
    _, executor = sdk
    added = run1(executor, "add", {"a": 2, "b": 3})
    assert added.ok and added.output is not None
    assert added.output.data == {"total": 5}
    media = run1(executor, "media", {})
    assert media.ok and media.output is not None
    blocks = [(b.type, b.text, b.data, b.url, b.media_type, b.name) for b in media.output.content]
    assert blocks == [
        ("text", "hello", None, None, None, None),
        ("image", None, "iVBORw0KGgo=", None, "image/png", None),
        ("audio", None, "UklGRg==", None, "audio/wav", None),
        ("file", None, None, "file:///tmp/report.txt", "text/plain", "report"),
        ("text", "embedded note", None, None, "text/plain", "mem://note"),
        ("file", None, "AAEC", None, "application/octet-stream", "mem://blob"),
    ]
    assert media.output.data == {"k": 1}
    failed = run1(executor, "fail", {"message": "boom"})
    assert failed.ok and failed.output is not None  # the tool ran and reported a failure: the model sees it
    assert failed.output.is_error
    assert "fail" in failed.output.as_text()


def test_calls_run_concurrently_on_one_session(sdk: tuple[MCPConnector, Executor]) -> None:
    connector, executor = sdk
    run1(executor, "echo", {"text": "warm"})
    opened = connector.sessions_opened
    start = time.monotonic()
    results = executor.run([ToolCall(str(i), "nap", {"seconds": 1.0}) for i in range(4)])
    elapsed = time.monotonic() - start
    assert [r.status for r in results] == ["ok"] * 4
    assert elapsed < 3.0, f"four 1 s calls took {elapsed:.2f}s: they did not run concurrently"
    assert connector.sessions_opened == opened  # no session opened per call


def test_progress_notifications_become_call_progress_events(sdk: tuple[MCPConnector, Executor]) -> None:
    _, executor = sdk
    events = list(executor.stream([ToolCall("p", "nap", {"seconds": 0.2})]))
    progress = [e.value for e in events if isinstance(e, CallProgress)]
    assert progress == [{"progress": 0.0, "total": 2.0, "message": "starting"},
                        {"progress": 1.0, "total": 2.0, "message": "halfway"}]
    assert isinstance(events[-1], CallFinished) and events[-1].result.ok


def test_timeout_ends_the_call_and_cancels_it_on_the_server(sdk: tuple[MCPConnector, Executor],
                                                            cancel_log: Path) -> None:
    _, executor = sdk
    start = time.monotonic()
    result = run1(executor, "nap", {"seconds": 30}, timeout=0.5)
    assert result.status == "timeout"
    assert time.monotonic() - start < 5
    deadline = time.monotonic() + 10
    while not (cancel_log.exists() and "cancelled nap 30" in cancel_log.read_text()):
        assert time.monotonic() < deadline, "the server never saw notifications/cancelled"
        time.sleep(0.05)
    again = run1(executor, "echo", {"text": "next"})
    assert again.ok and again.output is not None and again.output.as_text() == "next"


def test_a_server_that_dies_fails_the_call_and_is_restarted(sdk: tuple[MCPConnector, Executor], track: Any) -> None:
    connector, executor = sdk
    first = server_pid(executor)
    opened = connector.sessions_opened
    died = run1(executor, "die", {})
    assert died.status == "error" and died.error is not None
    assert "exited during the call to 'die'" in died.error.message
    assert "started again for the next call" in died.error.message
    second = server_pid(executor)
    track()
    assert second != first and not alive(first)
    assert connector.sessions_opened == opened + 1


def test_name_clashes_across_servers_are_reported_or_prefixed(sdk: tuple[MCPConnector, Executor],
                                                              track: Any) -> None:
    connector, _ = sdk
    other = MCPConnector(SDK_SERVER[0], SDK_SERVER[1:], cwd=str(ROOT), label="other")
    try:
        with pytest.raises(DuplicateToolError) as caught:
            Executor([connector, other], mode="sequential")
        message = str(caught.value)
        assert "MCPConnector(sdk)" in message and "MCPConnector(other)" in message
        prefixed = MCPConnector(SDK_SERVER[0], SDK_SERVER[1:], cwd=str(ROOT), prefix="b_")
        try:
            with Executor([connector, prefixed], mode="sequential") as ex:
                assert {"echo", "b_echo"} <= set(ex.tools)
                result = ex.run([ToolCall("x", "b_echo", {"text": "via prefix"})])[0]
                assert result.ok and result.output is not None and result.output.as_text() == "via prefix"
        finally:
            prefixed.close()
    finally:
        other.close()


def test_no_server_process_survives_close() -> None:
    before = _servers()
    connector = MCPConnector(SDK_SERVER[0], SDK_SERVER[1:], cwd=str(ROOT))
    executor = Executor([connector], workers=2)
    try:
        pid = server_pid(executor)
        assert alive(pid)
        executor.close()  # the executor that used the connector
        _gone(pid)
        reopened = Executor([connector], workers=2)  # the connector itself still works, on a new session
        pid2 = server_pid(reopened)
        assert pid2 != pid
        connector.close()
        _gone(pid2)
        reopened.close()
    finally:
        executor.close()
        connector.close()
    assert _servers() <= before


def test_no_server_process_survives_agent_close() -> None:
    from toolfork.agent import Agent

    connector = MCPConnector(SDK_SERVER[0], SDK_SERVER[1:], cwd=str(ROOT))
    agent = Agent(tools=[connector], workers=2)
    try:
        pid = server_pid(agent._get_executor())  # the executor the agent runs its tool calls on
        agent.close()
        _gone(pid)
    finally:
        agent.close()
        connector.close()


def _servers() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True) if "sdk_server" in " ".join(p.cmdline())}


def _gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while alive(pid):
        assert time.monotonic() < deadline, f"server process {pid} survived close()"
        time.sleep(0.05)


# ------------------------------------------------------------------ streamable HTTP

@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    with serving(SDK_SERVER) as url:
        yield url


def test_streamable_http_server(http_server: str) -> None:
    connector = MCPConnector(url=http_server, headers={"X-Test": "1"}, prefix="web_")
    try:
        with Executor([connector], workers=4) as executor:
            results = executor.run([ToolCall(str(i), "web_nap", {"seconds": 0.5}) for i in range(3)]
                                   + [ToolCall("a", "web_add", {"a": 1, "b": 2}),
                                      ToolCall("h", "web_header", {"name": "x-test"})])
            assert [r.status for r in results] == ["ok"] * 5
            assert results[3].output is not None and results[3].output.data == {"total": 3}
            assert results[4].output is not None and results[4].output.as_text() == "1"  # headers= was sent
    finally:
        connector.close()


def test_http_server_down_is_a_clear_error(http_server: str) -> None:
    port = free_port()
    down = MCPConnector(url=f"http://127.0.0.1:{port}/mcp")
    try:
        with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}/mcp"):
            down.tools()
    finally:
        down.close()
    # A server that goes away after the tools were listed: the call's result says so.
    port = free_port()
    proc = subprocess.Popen([*SDK_SERVER, "--http", str(port)], cwd=ROOT, env=python_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    connector = MCPConnector(url=f"http://127.0.0.1:{port}/mcp")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                connector.tools()
                break
            except ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        proc.terminate()
        proc.wait(10)
        with Executor([connector], workers=2) as executor:
            result = executor.run([ToolCall("x", "echo", {"text": "anyone?"})])[0]
        assert result.status == "error" and result.error is not None
        assert f"127.0.0.1:{port}/mcp" in result.error.message
    finally:
        connector.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ the npm reference server

def test_reference_server_everything(npm_tools: Path) -> None:
    connector = MCPConnector("node", [str(EVERYTHING), "stdio"], prefix="ev_")
    try:
        tools = {t.name: t for t in connector.tools()}
        assert tools["ev_echo"].annotations["readOnlyHint"] is True  # type: ignore[attr-defined]
        assert tools["ev_echo"].title == "Echo Tool"  # type: ignore[attr-defined]
        with Executor([connector], workers=4) as executor:
            events = list(executor.stream([
                ToolCall("e", "ev_echo", {"message": "hi"}),
                ToolCall("s", "ev_get-sum", {"a": 2, "b": 3}),
                ToolCall("i", "ev_get-tiny-image", {}),
                ToolCall("l", "ev_trigger-long-running-operation", {"duration": 0.6, "steps": 3}),
            ]))
        results = {e.call_id: e.result for e in events if isinstance(e, CallFinished)}
        assert all(r.ok for r in results.values()), results
        assert "hi" in results["e"].output.as_text()  # type: ignore[union-attr]
        assert "5" in results["s"].output.as_text()  # type: ignore[union-attr]
        assert any(b.type == "image" and b.data for b in results["i"].output.content)  # type: ignore[union-attr]
        assert sum(1 for e in events if isinstance(e, CallProgress) and e.call_id == "l") >= 2
    finally:
        connector.close()


# ------------------------------------------------------------------ toolfork run --mcp

def test_run_with_mcp_option() -> None:
    calls = "\n".join(json.dumps(c) for c in [
        {"id": "1", "name": "add", "arguments": {"a": 2, "b": 40}},
        {"id": "2", "name": "echo", "arguments": {"text": "hello"}},
    ]) + "\n"
    command = " ".join([sys.executable, "-m", "tests.mcp.sdk_server"])
    done = subprocess.run([sys.executable, "-m", "toolfork", "run", "--mcp", command, "-"], input=calls, cwd=ROOT,
                          env=python_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert rows["1"]["output"]["data"] == {"total": 42}
    assert rows["2"]["output"]["content"][0]["text"] == "hello"


def test_run_with_an_unreachable_mcp_server_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "toolfork", "run", "--mcp-url", "http://127.0.0.1:9/mcp", "-"],
                          input="", cwd=ROOT, env=python_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "could not connect to the MCP server at http://127.0.0.1:9/mcp" in done.stderr


@pytest.mark.parametrize("seconds_left", [0.5, None])
def test_the_sdk_read_timeout_leaves_the_deadline_to_the_executor(tmp_path: Path, seconds_left: float | None) -> None:
    """The relay request carries the SDK's read timeout: past the call's deadline by a slack, so the
    executor's kill ("timeout") comes first; none when the call has no deadline."""
    import json as _json
    import socket
    import threading

    from toolfork.mcp.relay import READ_TIMEOUT_SLACK_S, RemoteTool
    from toolfork.tools.runtime import ToolRuntime

    address = str(tmp_path / "relay.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(1)
    requests: list[dict[str, Any]] = []

    def relay() -> None:
        conn, _ = server.accept()
        with conn, conn.makefile("rb") as lines:
            requests.append(_json.loads(lines.readline()))
            conn.sendall(b'{"result": {"content": [{"type": "text", "text": "done"}]}}\n')

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    deadline = None if seconds_left is None else time.monotonic() + seconds_left
    try:
        out = RemoteTool(address, "nap", "test server")(ToolRuntime("c", "nap", deadline), seconds=1)
    finally:
        thread.join(5)
        server.close()
    assert out.as_text() == "done"
    [request] = requests
    assert request["tool"] == "nap" and request["arguments"] == {"seconds": 1}
    if seconds_left is None:
        assert request["timeout"] is None
    else:
        assert seconds_left + READ_TIMEOUT_SLACK_S - 0.5 < request["timeout"] <= seconds_left + READ_TIMEOUT_SLACK_S
