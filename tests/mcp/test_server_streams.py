"""``toolfork mcp serve`` over streamable HTTP with the SDK's client, on both ways of starting a
session: the 2026-07-28 revision (the client's default: ``server/discover``, no handshake) and the
legacy ``initialize`` handshake. What must hold on each: every progress notification of a call
arrives, in order, before its result; a call whose client went away is cancelled (its worker killed);
SIGTERM with calls in flight ends the server and every process of it.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.mcp.conftest import alive, http_server

pytestmark = pytest.mark.xdist_group("mcp_server_streams")

SERVE = [sys.executable, "-m", "toolfork", "mcp", "serve", "--tools", "tests/mcp/served_tools.py"]
MODES = ["2026-07-28", "legacy"]


@pytest.fixture(scope="module")
def url(track: Any) -> Iterator[str]:
    with http_server([*SERVE, "--http", "127.0.0.1:0", "--workers", "4", "--timeout", "60"]) as (_, address):
        track()
        yield address


async def _client_call(url: str, mode: str, name: str, arguments: dict[str, Any], progress: Any = None) -> Any:
    from mcp import Client

    async with Client(url, mode="legacy" if mode == "legacy" else "auto") as client:
        return await client.session.call_tool(name, arguments, progress_callback=progress)


@pytest.mark.parametrize("mode", MODES)
def test_progress_arrives_in_order_before_each_result(url: str, mode: str) -> None:
    from mcp import Client

    async def go() -> list[tuple[str, list[float]]]:
        async with Client(url, mode="legacy" if mode == "legacy" else "auto") as client:
            gate = asyncio.Semaphore(16)

            async def one(i: int) -> tuple[str, list[float]]:
                seen: list[float] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    seen.append(value)

                async with gate:
                    result = await client.session.call_tool("burst", {"n": 3}, progress_callback=progress)
                got = list(seen)  # what had arrived when the result did
                return "\n".join(c.text for c in result.content if c.type == "text"), got

            return list(await asyncio.gather(*[one(i) for i in range(200)]))

    outcomes = asyncio.run(asyncio.wait_for(go(), 100))
    assert len(outcomes) == 200
    assert all(text == "burst 3" for text, _ in outcomes), outcomes[:3]
    short = [got for _, got in outcomes if got != [1.0, 2.0, 3.0]]
    assert not short, f"{len(short)} of 200 calls missed or reordered progress before the result: {short[:5]}"


def _server_children(pid: int) -> list[int]:
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _wait_gone(pids: list[int], within: float = 20) -> None:
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids):
        assert time.monotonic() < deadline, f"still running: {[p for p in pids if alive(p)]}"
        time.sleep(0.05)


def _wait_file(path: Path, within: float = 30) -> int:
    deadline = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared: the call did not start"
        time.sleep(0.05)
    return int(path.read_text())


def _drop_mid_call(url: str, marker: Path) -> None:
    """Start a ``hang`` call in a raw HTTP request (legacy handshake) and close the socket while it runs."""
    import json
    from urllib.parse import urlparse

    parsed = urlparse(url)
    assert parsed.hostname is not None and parsed.port is not None

    def post(sock: socket.socket, body: dict[str, Any], session: str | None) -> bytes:
        data = json.dumps(body).encode()
        head = (f"POST {parsed.path} HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"MCP-Protocol-Version: 2025-11-25\r\n"
                + (f"Mcp-Session-Id: {session}\r\n" if session else "")
                + f"Content-Length: {len(data)}\r\n\r\n")
        sock.sendall(head.encode() + data)
        return sock.recv(65536)

    with socket.create_connection((parsed.hostname, parsed.port), timeout=30) as sock:
        reply = post(sock, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "dropper", "version": "1"}}},
            None)
        session = next((line.split(b":", 1)[1].strip().decode() for line in reply.split(b"\r\n")
                        if line.lower().startswith(b"mcp-session-id:")), None)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=30) as sock:
        post(sock, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=30)
    data = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "hang", "arguments": {"marker": str(marker)}}}).encode()
    head = (f"POST {parsed.path} HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            "MCP-Protocol-Version: 2025-11-25\r\n" + (f"Mcp-Session-Id: {session}\r\n" if session else "")
            + f"Content-Length: {len(data)}\r\n\r\n")
    sock.sendall(head.encode() + data)
    _wait_file(marker)
    sock.close()  # gone mid-call, without notifications/cancelled


def test_a_client_that_drops_mid_call_has_its_call_cancelled(track: Any, tmp_path: Path) -> None:
    # Two workers, no --timeout: only noticing that the clients are gone frees them for the third.
    with http_server([*SERVE, "--http", "127.0.0.1:0", "--workers", "2"]) as (_, address):
        track()
        pids = []
        for i in range(2):
            marker = tmp_path / f"drop{i}.pid"
            _drop_mid_call(address, marker)
            pids.append(int(marker.read_text()))
        _wait_gone(pids)  # each dropped call's worker is killed
        result = asyncio.run(asyncio.wait_for(_client_call(address, "2026-07-28", "add", {"a": 1, "b": 2}), 60))
        assert result.structured_content == {"total": 3}


# A client of the 2026-07-28 revision (``server/discover``, no session) in a process of its own: the
# SDK's client, as a user runs it. Killed mid-call, it sends nothing more: the kernel closes its sockets.
_MODERN_CLIENT = """
import asyncio, sys
from mcp import Client

async def main():
    async with Client(sys.argv[1], mode="auto") as client:
        assert client.session.protocol_version == "2026-07-28", client.session.protocol_version
        await client.session.call_tool("hang", {"marker": sys.argv[2]})

asyncio.run(main())
"""


def test_a_modern_client_that_drops_mid_call_has_its_call_cancelled(track: Any, tmp_path: Path) -> None:
    import subprocess

    from tests.mcp.conftest import ROOT, python_env

    # As the legacy test above: two workers, no --timeout, so only noticing the dropped clients frees them.
    with http_server([*SERVE, "--http", "127.0.0.1:0", "--workers", "2"]) as (_, address):
        track()
        pids = []
        for i in range(2):
            marker = tmp_path / f"modern{i}.pid"
            client = subprocess.Popen([sys.executable, "-c", _MODERN_CLIENT, address, str(marker)], cwd=ROOT,
                                      env=python_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                pids.append(_wait_file(marker))
            finally:
                client.kill()
                _, err = client.communicate(timeout=30)
            assert b"AssertionError" not in err, err.decode()  # it did speak 2026-07-28
        _wait_gone(pids)  # each dropped call's worker is killed
        result = asyncio.run(asyncio.wait_for(_client_call(address, "2026-07-28", "add", {"a": 1, "b": 2}), 60))
        assert result.structured_content == {"total": 3}


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_sigterm_with_calls_in_flight_leaves_no_process(track: Any, tmp_path: Path, transport: str) -> None:
    import subprocess

    from tests.mcp.conftest import ROOT, python_env

    marker = tmp_path / "inflight.pid"
    if transport == "http":
        with http_server([*SERVE, "--http", "127.0.0.1:0", "--workers", "2"]) as (proc, address):
            track()
            task_loop = asyncio.new_event_loop()
            try:
                call = task_loop.create_task(_client_call(address, "legacy", "hang", {"marker": str(marker)}))
                deadline = time.monotonic() + 30
                while not marker.exists():
                    assert time.monotonic() < deadline, "the call never started"
                    task_loop.run_until_complete(asyncio.sleep(0.05))
                tree = [proc.pid, *_server_children(proc.pid)]
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(30) == 0
                _wait_gone(tree)
                call.cancel()
                task_loop.run_until_complete(asyncio.gather(call, return_exceptions=True))
            finally:
                task_loop.close()
        return
    request = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
               b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
               b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
               b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{"marker":"'
               + str(marker).encode() + b'"}}}\n')
    proc = subprocess.Popen([*SERVE, "--workers", "2"], cwd=ROOT, env=python_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None
        proc.stdin.write(request)
        proc.stdin.flush()
        _wait_file(marker)
        tree = [proc.pid, *_server_children(proc.pid)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        _wait_gone(tree)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def test_log_honours_set_level_and_elicitation_answers_or_times_out(url: str) -> None:
    import mcp_types as types
    from mcp import Client

    logs: list[str] = []
    slow = asyncio.Event()

    async def log(params: Any) -> None:
        logs.append(str(params.data))

    async def elicit(context: Any, params: Any) -> Any:
        if slow.is_set():
            await asyncio.sleep(3600)  # a user who never answers
        return types.ElicitResult(action="accept", content={"word": "blue"})

    async def go() -> tuple[Any, Any, Any, Any]:
        async with Client(url, mode="legacy", logging_callback=log, elicitation_callback=elicit) as client:
            await client.session.set_logging_level("info")
            said = await client.call_tool("say", {})
            answered = await client.call_tool("ask_user", {})
            slow.set()
            unanswered = await client.call_tool("ask_user", {})
            after = await client.call_tool("add", {"a": 1, "b": 1})
            return said, answered, unanswered, after

    said, answered, unanswered, after = asyncio.run(asyncio.wait_for(go(), 90))
    assert said.content[0].text == "said" and logs == ["at info", "at warning"]
    assert answered.content[0].text == "accept:blue"
    assert unanswered.is_error and "timed out" in unanswered.content[0].text  # the call's own 3 s
    assert after.structured_content == {"total": 2}


def test_runtime_without_a_client() -> None:
    from toolfork.tools.runtime import ClientUnavailable, ToolRuntime

    runtime = ToolRuntime("c1", "t")
    runtime.log("info", "nobody listens")  # a no-op, not an error
    with pytest.raises(ClientUnavailable, match="no MCP client"):
        runtime.elicit("?", {"type": "object"})
    with pytest.raises(ClientUnavailable, match="sample"):
        runtime.sample("hello")
    with pytest.raises(ValueError, match="level must be one of"):
        runtime.log("loud", "x")


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_call_frees_its_worker(url: str, mode: str, tmp_path: Path) -> None:
    # On 2026-07-28 the client sends no notifications/cancelled: it closes the request's stream, which
    # only the disconnect check notices.
    from mcp import Client

    marker = tmp_path / "cancelled.pid"

    async def go() -> None:
        async with Client(url, mode="legacy" if mode == "legacy" else "auto") as client:
            task = asyncio.ensure_future(client.session.call_tool("hang", {"marker": str(marker)}))
            deadline = time.monotonic() + 30
            while not marker.exists():
                assert time.monotonic() < deadline, "the call never started"
                await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(go(), 60))
    _wait_gone([int(marker.read_text())])  # the module's timeout is 60 s: only the cancellation ends it sooner


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_can_answer_with_a_protocol_error(url: str, mode: str) -> None:
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    async def go() -> Any:
        async with Client(url, mode="legacy" if mode == "legacy" else "auto") as client:
            try:
                return await client.call_tool("refuse", {})
            except MCPError as exc:
                return exc

    raised = asyncio.run(asyncio.wait_for(go(), 60))
    assert isinstance(raised, MCPError), raised
    assert (raised.error.code, raised.error.message) == (-32003, "needs sampling")
    assert raised.error.data == {"requiredCapabilities": {"sampling": {}}}
