"""``ToolRuntime.elicit`` / ``sample`` of a plain toolfork tool on a 2026-07-28 session: the call
answers "input required" (SEP-2322), the SDK's client answers through its callbacks and retries, and
the tool, parked in its worker, goes on from where it asked. Real server processes (streamable HTTP
and stdio), the SDK's own ``Client``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import ROOT, alive, http_server, python_env

pytestmark = pytest.mark.xdist_group("mcp_server_input_required")

SERVE = [sys.executable, "-m", "toolfork", "mcp", "serve", "--tools", "tests/mcp/served_tools.py", "--workers", "2"]


@pytest.fixture(scope="module")
def url(track: Any) -> Iterator[str]:
    with http_server([*SERVE, "--http", "127.0.0.1:0", "--timeout", "60"]) as (_, address):
        track()
        yield address


def _target(url: str, transport: str) -> Any:
    if transport == "http":
        return url
    from mcp import StdioServerParameters

    return StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--timeout", "60"], env=python_env(),
                                 cwd=str(ROOT))


async def _unused(context: Any, params: Any) -> Any:
    raise AssertionError("the test answers the rounds itself")  # declared: the client can elicit


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_elicit_then_sample_are_two_rounds_of_one_run(url: str, transport: str, tmp_path: Path) -> None:
    import mcp_types as types
    from mcp import Client

    asked: list[str] = []
    log = tmp_path / "runs.log"

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(f"elicit:{params.message}")
        return types.ElicitResult(action="accept", content={"word": "blue"})

    async def sample(context: Any, params: Any) -> Any:
        asked.append(f"sample:{params.messages[0].content.text}:{params.system_prompt}")
        return types.CreateMessageResult(role="assistant", model="rhymer",
                                         content=types.TextContent(type="text", text="true"))

    async def go() -> tuple[str, Any]:
        async with Client(_target(url, transport), mode="auto", elicitation_callback=elicit,
                          sampling_callback=sample) as client:
            version = client.session.protocol_version
            return version, await client.call_tool("interview", {"log": str(log)})

    version, result = asyncio.run(asyncio.wait_for(go(), 90))
    assert version == "2026-07-28"  # the revision with no requests mid-call
    assert not result.is_error, _text(result)
    runs = log.read_text().split()
    assert len(runs) == 1, f"the tool's body ran {len(runs)} times: {runs}"  # parked, not re-run
    assert _text(result) == f"accept:blue:true:rhymer:{runs[0]}"  # and in the one worker throughout
    assert asked == ["elicit:a word?", "sample:a rhyme for blue:rhymes only"]


def test_the_rounds_on_the_wire(url: str) -> None:
    import mcp_types as types
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    async def go() -> tuple[Any, Any, Any, Any]:
        async with Client(url, mode="auto", elicitation_callback=_unused) as client:
            first = await client.session.call_tool("ask_user", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult), first
            (key, request), = first.input_requests.items()
            answer = types.ElicitResult(action="accept", content={"word": "red"})
            second = await client.session.call_tool("ask_user", {}, input_responses={key: answer},
                                                    request_state=first.request_state,
                                                    allow_input_required=True)
            errors = []
            for state in (first.request_state, "made-up"):  # answered already; never was
                try:
                    await client.session.call_tool("ask_user", {}, request_state=state, allow_input_required=True)
                except MCPError as exc:
                    errors.append(exc)
            return first, request, second, errors

    first, request, second, errors = asyncio.run(asyncio.wait_for(go(), 60))
    assert request.method == "elicitation/create" and request.params.message == "a word?"
    assert request.params.requested_schema["properties"] == {"word": {"type": "string"}}
    assert isinstance(first.request_state, str) and len(first.request_state) >= 24
    assert _text(second) == "accept:red"
    assert [e.error.code for e in errors] == [types.INVALID_PARAMS, types.INVALID_PARAMS]
    assert all("request_state" in e.error.message and "no call waiting" in e.error.message for e in errors)


def test_a_question_never_answered_ends_at_the_call_deadline(url: str, tmp_path: Path) -> None:
    import mcp_types as types
    from mcp import Client

    marker = tmp_path / "asked.pid"

    async def go() -> tuple[int, Any]:
        async with Client(url, mode="auto", elicitation_callback=_unused) as client:
            first = await client.session.call_tool("ask_user", {"marker": str(marker)}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult), first
            pid = int(marker.read_text())
            deadline = time.monotonic() + 30
            while alive(pid):  # ask_user's 3 s: the executor kills the parked call's worker
                assert time.monotonic() < deadline, "the parked call outlived its deadline"
                await asyncio.sleep(0.1)
            late = await client.session.call_tool("ask_user", {"marker": str(marker)},
                                                  request_state=first.request_state, allow_input_required=True)
            return pid, late

    _, late = asyncio.run(asyncio.wait_for(go(), 60))
    assert late.is_error and "timed out" in _text(late)  # the late retry gets the call's outcome


def test_a_retry_must_repeat_its_call(url: str) -> None:
    import mcp_types as types
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    async def go() -> tuple[Any, Any]:
        async with Client(url, mode="auto", elicitation_callback=_unused) as client:
            first = await client.session.call_tool("ask_user", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult), first
            try:
                await client.session.call_tool("ask_user", {"marker": "/elsewhere"}, request_state=first.request_state,
                                               allow_input_required=True)
            except MCPError as exc:
                wrong = exc
            (key, _), = first.input_requests.items()
            right = await client.session.call_tool("ask_user", {}, request_state=first.request_state,
                                                   input_responses={key: types.ElicitResult(action="decline")},
                                                   allow_input_required=True)
            return wrong, right

    wrong, right = asyncio.run(asyncio.wait_for(go(), 60))
    assert wrong.error.code == types.INVALID_PARAMS and "other arguments" in wrong.error.message
    assert _text(right) == "decline:None"  # the refused retry did not use the call up


def test_a_client_without_the_capability_is_not_asked(url: str) -> None:
    from mcp import Client

    async def go() -> Any:
        async with Client(url, mode="auto") as client:  # no elicitation callback: none declared
            return await client.call_tool("ask_user", {})

    result = asyncio.run(asyncio.wait_for(go(), 60))
    assert result.is_error and "did not declare the elicitation capability" in _text(result)
