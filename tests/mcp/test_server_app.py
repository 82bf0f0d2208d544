"""``toolfork mcp serve --app``: an SDK ``MCPServer`` app (``tests/mcp/pool_app.py``) served by the
SDK with its tools in the fork pool, driven by the SDK's client on both session kinds (2026-07-28 and
the legacy handshake) and over stdio.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.mcp.conftest import ROOT, alive, http_server, python_env

pytestmark = pytest.mark.xdist_group("mcp_server_app")

SERVE = [sys.executable, "-m", "toolfork", "mcp", "serve", "--app", "tests/mcp/pool_app.py:app", "--workers", "2",
         "--timeout", "5"]
MODES = ["2026-07-28", "legacy"]


@pytest.fixture(scope="module")
def served(track: Any) -> Iterator[tuple[int, str]]:
    with http_server([*SERVE, "--http", "127.0.0.1:0"]) as (proc, url):
        track()
        yield proc.pid, url


class Seen:
    def __init__(self) -> None:
        self.logs: list[str] = []
        self.progress: list[float] = []
        self.asked: list[str] = []

    async def log(self, params: Any) -> None:
        self.logs.append(str(params.data))

    async def on_progress(self, value: float, total: float | None, message: str | None) -> None:
        self.progress.append(value)

    async def elicit(self, context: Any, params: Any) -> Any:
        import mcp_types as types

        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"word": "blue"})

    async def sample(self, context: Any, params: Any) -> Any:
        import mcp_types as types

        text = params.messages[0].content.text
        return types.CreateMessageResult(role="assistant", model="echo", content=types.TextContent(
            type="text", text=text.upper()))


def session(target: Any, mode: str, seen: Seen) -> Any:
    from mcp import Client

    return Client(target, mode="legacy" if mode == "legacy" else "auto", log_level="debug",
                  logging_callback=seen.log, elicitation_callback=seen.elicit, sampling_callback=seen.sample)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.mark.parametrize("mode", MODES)
def test_tools_run_in_workers_and_the_rest_in_the_sdk(served: tuple[int, str], mode: str) -> None:
    server_pid, url = served

    async def go() -> tuple[Any, Any, Any, Any]:
        async with session(url, mode, Seen()) as client:
            listed = await client.list_tools()
            where = await client.call_tool("where", {})
            resource = await client.read_resource("test://hello")
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            return listed, where, resource, prompt

    listed, where, resource, prompt = run(go())
    assert {"where", "crash", "hang", "chatty", "ask", "refuse"} <= {t.name for t in listed.tools}
    pid = where.structured_content["pid"]
    assert pid != server_pid and pid in [c.pid for c in psutil.Process(server_pid).children(recursive=True)]
    assert resource.contents[0].text == f"hello from {server_pid}"  # the SDK, in the server process
    assert prompt.messages[0].content.text == "Hello, Ada"


def test_a_crash_and_a_hang_fail_one_call_each(served: tuple[int, str], tmp_path: Path) -> None:
    _, url = served
    marker = tmp_path / "hang.pid"

    async def go() -> tuple[Any, Any, Any]:
        async with session(url, "2026-07-28", Seen()) as client:
            crashed = await client.call_tool("crash", {})
            hung = await client.call_tool("hang", {"marker": str(marker)})
            after = await client.call_tool("where", {})
            return crashed, hung, after

    crashed, hung, after = run(go())
    assert crashed.is_error and "SIGSEGV" in text(crashed)
    assert hung.is_error and "timed out" in text(hung)
    pid = int(marker.read_text())
    deadline = time.monotonic() + 20
    while alive(pid):
        assert time.monotonic() < deadline, "the timed-out call's worker is still running"
        time.sleep(0.05)
    assert not after.is_error


@pytest.mark.parametrize("mode", MODES)
def test_context_log_progress_elicitation_sampling_cross_the_fork(served: tuple[int, str], mode: str) -> None:
    _, url = served
    seen = Seen()

    from mcp.shared.exceptions import MCPError

    async def go() -> tuple[Any, list[str], list[float], Any]:
        async with session(url, mode, seen) as client:
            chatty = await client.session.call_tool("chatty", {}, progress_callback=seen.on_progress)
            logs, progress = list(seen.logs), list(seen.progress)  # what had arrived with the result
            try:
                asked: Any = await client.call_tool("ask", {})
            except MCPError as exc:
                asked = exc
            return chatty, logs, progress, asked

    chatty, logs, progress, asked = run(go())
    assert text(chatty).startswith("done in ")
    assert logs == ["first", "second"]
    assert progress == [1.0, 2.0, 3.0]
    if mode == "legacy":
        assert not isinstance(asked, Exception) and not asked.is_error, asked
        assert text(asked) == "accept:blue:SAY BLUE"
        assert seen.asked == ["a word, please"]
    else:
        # A 2026-07-28 request has no channel for a request from the server mid-call (a tool asks
        # by returning an InputRequiredResult instead): the SDK's own protocol error, as unpooled.
        assert isinstance(asked, MCPError) and "no back-channel" in asked.error.message, asked
        assert seen.asked == []


@pytest.mark.parametrize("mode", MODES)
def test_a_protocol_error_from_a_tool_stays_one(served: tuple[int, str], mode: str) -> None:
    from mcp.shared.exceptions import MCPError

    _, url = served

    async def go() -> Any:
        async with session(url, mode, Seen()) as client:
            try:
                return await client.call_tool("refuse", {})
            except MCPError as exc:
                return exc

    raised = run(go())
    assert isinstance(raised, MCPError), raised
    assert raised.error.code == -32003
    assert raised.error.data == {"requiredCapabilities": {"sampling": {}}}


def test_stdio(track: Any) -> None:
    from mcp import StdioServerParameters

    seen = Seen()
    params = StdioServerParameters(command=SERVE[0], args=SERVE[1:], env=python_env(), cwd=str(ROOT))

    async def go() -> tuple[Any, Any]:
        async with session(params, "2026-07-28", seen) as client:
            track()
            where = await client.call_tool("where", {})
            chatty = await client.session.call_tool("chatty", {}, progress_callback=seen.on_progress)
            return where, chatty

    where, chatty = run(go())
    assert isinstance(where.structured_content["pid"], int)
    assert text(chatty).startswith("done in ") and seen.progress == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(("spec", "extra", "says"), [
    ("tests/mcp/no_such_app.py:app", [], "no file"),
    ("tests/mcp/pool_app.py:nope", [], "has no attribute 'nope'"),
    ("tests/mcp/pool_app.py", [], "takes FILE.py:ATTR"),
    ("tests/mcp/pool_app.py:Answer", [], "is not an MCP server app"),
    ("tests/mcp/pool_app.py:app", ["--tools", "tests/mcp/served_tools.py"], "does not take --toolkit or --tools"),
])
def test_a_bad_app_spec_is_a_usage_error_naming_it(spec: str, extra: list[str], says: str) -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "toolfork", "mcp", "serve", "--app", spec, *extra], cwd=ROOT,
                          env=python_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "toolfork mcp serve: error:" in done.stderr, done.stderr
