"""A server that asks back mid-call: elicitation and sampling answered by the connector's callbacks,
over stdio and streamable HTTP, on the handshake (legacy) and the 2026-07-28 revision, with the tool
call running in a fork worker and its deadline bounding a callback that never answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest

from tests.mcp.conftest import ROOT, SDK_SERVER
from tests.mcp.http_servers import serving
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.mcp import MCPConnector

pytestmark = pytest.mark.xdist_group("mcp_callbacks")  # one HTTP server for the module


@pytest.fixture(scope="module")
def http_url(track: Any) -> Iterator[str]:
    with serving(SDK_SERVER) as url:
        track()
        yield url


def connect(transport: str, http_url: str, protocol: str, **callbacks: Any) -> MCPConnector:
    if transport == "http":
        return MCPConnector(url=http_url, protocol=protocol, **callbacks)
    return MCPConnector(SDK_SERVER[0], SDK_SERVER[1:], cwd=str(ROOT), protocol=protocol, **callbacks)


def run1(connector: MCPConnector, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult:
    with Executor([connector], workers=2) as executor:
        return executor.run([ToolCall("c", name, arguments, timeout=timeout)])[0]


asked: list[str] = []


def answer_ada(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """A plain function (the connector runs it in a thread), as a prompt to a person would be."""
    asked.append(params.message)
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def model(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    prompt = params.messages[0].content
    text = getattr(prompt, "text", "")
    return types.CreateMessageResult(role="assistant", model="stub-model",
                                     content=types.TextContent(type="text", text=text.upper()))


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_elicitation_and_sampling_are_answered_by_the_callbacks(transport: str, protocol: str,
                                                                http_url: str) -> None:
    asked.clear()
    with connect(transport, http_url, protocol, elicitation=answer_ada, sampling=model) as connector:
        with Executor([connector], workers=2) as executor:
            ask, think = executor.run([ToolCall("a", "ask", {"question": "Your name?"}),
                                       ToolCall("t", "think", {"prompt": "hello"})])
    assert ask.ok and ask.output is not None, ask.error
    assert ask.output.as_text() == "accept:Ada"
    assert asked == ["Your name?"]
    assert think.ok and think.output is not None, think.error
    assert think.output.as_text() == "stub-model:HELLO"


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
def test_log_messages_reach_the_logging_callback(protocol: str, http_url: str) -> None:
    received: list[Any] = []

    async def collect(params: types.LoggingMessageNotificationParams) -> None:
        received.append((params.level, params.data))

    with connect("http", http_url, protocol, logging=collect, log_level="info") as connector:
        result = run1(connector, "note", {"text": "hello"})
        assert result.ok and result.output is not None and result.output.as_text() == "noted"
        deadline = time.monotonic() + 10  # a notification may trail its result by a moment
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
    assert received == [("info", "note: hello")]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_server_that_asks_a_connector_without_callbacks_gets_a_refusal_not_a_hang(transport: str,
                                                                                     http_url: str) -> None:
    with connect(transport, http_url, "legacy") as connector:
        result = run1(connector, "ask", {"question": "Your name?"}, timeout=60)
    assert result.status in ("ok", "error")  # the server's answer to a refused elicitation, never a timeout
    text = result.output.as_text() if result.output is not None else str(result.error)
    assert "accept" not in text


def test_a_callback_that_never_answers_is_ended_by_the_call_deadline(http_url: str) -> None:
    release = threading.Event()

    def stuck(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        release.wait(60)
        return types.ElicitResult(action="decline")

    try:
        with connect("stdio", http_url, "legacy", elicitation=stuck) as connector:
            start = time.monotonic()
            result = run1(connector, "ask", {"question": "anyone?"}, timeout=3)
            assert result.status == "timeout"
            assert time.monotonic() - start < 30
            release.set()
            after = run1(connector, "echo", {"text": "next"})  # the session still serves other calls
            assert after.ok and after.output is not None and after.output.as_text() == "next"
    finally:
        release.set()


def test_callbacks_are_checked_when_the_connector_is_built() -> None:
    with pytest.raises(TypeError, match=r"elicitation=\.\.\.\) must be callable"):
        MCPConnector("true", elicitation="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="protocol must be one of"):
        MCPConnector("true", protocol="2025-11-25")
    with pytest.raises(ValueError, match="log_level must be one of"):
        MCPConnector("true", log_level="loud")
    with pytest.raises(ValueError, match=r"auth=.*needs url="):
        MCPConnector("true", auth=object())
