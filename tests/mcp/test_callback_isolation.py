"""``toolfork mcp serve``'s callback socket, attacked from a tool, through the SDK's own client: a call
reaches only its own client's session (another call's id, guessed or derived from one's own, reaches
nobody), and what a tool sends there is never unpickled by the server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import http_server

pytestmark = pytest.mark.xdist_group("mcp_callback_isolation")

SERVE = [sys.executable, "-m", "toolfork", "mcp", "serve", "--tools", "tests/mcp/callback_attack_tools.py",
         "--http", "127.0.0.1:0", "--workers", "2", "--timeout", "60"]


def test_a_tool_reaches_no_other_clients_session_and_the_server_runs_no_pickle(track: Any, tmp_path: Path) -> None:
    import mcp_types as types
    from mcp import Client

    marker = tmp_path / "planted.txt"
    victim_saw: list[str] = []

    async def victim_log(params: Any) -> None:
        victim_saw.append(f"log:{params.data}")

    async def victim_elicit(context: Any, params: Any) -> Any:
        victim_saw.append(f"elicit:{params.message}")
        return types.ElicitResult(action="accept", content={"password": "hunter2"})

    async def go(url: str) -> tuple[Any, Any]:
        async with Client(url, mode="legacy", logging_callback=victim_log, elicitation_callback=victim_elicit) as a, \
                Client(url, mode="legacy") as b:
            await a.session.set_logging_level("debug")
            victim = asyncio.ensure_future(a.call_tool("wait_here", {"seconds": 8}))
            await asyncio.sleep(1.0)  # the victim's call is in flight
            attacked = await b.call_tool("attack", {"marker": str(marker)})
            return await victim, attacked

    with http_server(SERVE) as (_, url):
        track()
        victim, attacked = asyncio.run(asyncio.wait_for(go(url), 120))
    assert not victim.is_error and victim.content[0].text == "mcp"
    assert victim_saw == [], "another client's tool reached the victim's session"
    assert attacked.content[0].text == "reached nothing", attacked.content[0].text
    assert not marker.exists(), "the server unpickled what a tool sent"
