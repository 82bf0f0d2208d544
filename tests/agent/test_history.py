"""Chat histories: the SQLite one continues a conversation in another process, keeps threads
apart, stores every message kind exactly, and keeps call / result pairs whatever fails."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.agent.agent_tools import PNG_BYTES, add, boom
from tests.agent.conftest import make_provider
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import ToolOutput
from toolfork.agent import (
    Agent,
    AssistantMessage,
    InMemoryChatHistory,
    SQLiteChatHistory,
    ToolCallRequest,
    ToolResultItem,
    ToolResultMessage,
    ToolRunFailed,
    UserMessage,
)

REPO = Path(__file__).resolve().parents[2]


def test_a_conversation_continues_in_another_process(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 20, "b": 22})]), Turn(text="42"),
                         Turn(text="you asked for 20+22")])
    script = textwrap.dedent(f"""
        from tests.agent.agent_tools import add
        from toolfork.agent import Agent, SQLiteChatHistory
        from toolfork.agent.providers import Anthropic

        provider = Anthropic(model="m", api_key="k", base_url={model_server.base_url!r}, max_retries=0)
        with Agent(provider=provider, tools=[add], history=SQLiteChatHistory({str(db)!r}, "alice")) as agent:
            print(agent.chat("what is 20+22?").text)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add],
               history=SQLiteChatHistory(db, "alice")) as agent:
        assert agent.chat("what did I ask?").text == "you asked for 20+22"
    last = model_server.requests[-1]
    assert [c.call_id for c in last.tool_calls] == ["c1"]
    assert last.tool_results[0].content == "42"
    assert [m.role for m in SQLiteChatHistory(db, "alice").messages()] == \
        ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert SQLiteChatHistory(db, "bob").messages() == []


def test_every_message_kind_round_trips_through_sqlite(tmp_path: Path) -> None:
    image = ToolOutput.image(PNG_BYTES)
    messages = [
        UserMessage([*ToolOutput.text("look").content, *image.content]),
        AssistantMessage(text="calling", tool_calls=[ToolCallRequest("c1", "see", {"x": [1, 2]}),
                                                     ToolCallRequest("c2", "add", {}, invalid_arguments="{oops")],
                         stop_reason="tool_use", model="m", usage={"input_tokens": 3, "output_tokens": 4},
                         raw={"provider": "anthropic", "content": [{"type": "thinking", "thinking": "hm"}]}),
        ToolResultMessage([ToolResultItem("c1", "see", image, "ok"),
                           ToolResultItem("c2", "add", ToolOutput.error("bad"), "invalid-arguments")]),
        AssistantMessage(text="done"),
    ]
    history = SQLiteChatHistory(tmp_path / "h.sqlite", "t")
    history.extend(messages)
    assert SQLiteChatHistory(tmp_path / "h.sqlite", "t").messages() == messages
    history.replace(messages[:1])
    assert history.messages() == messages[:1]
    history.clear()
    assert len(history) == 0
    with pytest.raises(ValueError, match="thread_id"):
        SQLiteChatHistory(tmp_path / "h.sqlite", "")


def test_a_failed_run_leaves_pairs_in_the_sqlite_history(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "boom", {"message": "x"}),
                                          ToolCallSpec("c2", "add", {"a": 1, "b": 1})]),
                         Turn(text="recovered")])
    provider = make_provider(model_server, "openai-chat")
    with Agent(provider=provider, tools=[add, boom], history=SQLiteChatHistory(db, "t")) as agent:
        with pytest.raises(ToolRunFailed):
            agent.chat("go")
    stored = SQLiteChatHistory(db, "t").messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert [r.call_id for r in stored[2].results] == ["c1", "c2"]  # type: ignore[union-attr]
    with Agent(provider=provider, tools=[add, boom], history=SQLiteChatHistory(db, "t")) as agent:
        assert agent.chat("and now?").text == "recovered"
    assert not model_server.failures


def test_subclass_chat_history_hook(model_server: ScriptedModelServer) -> None:
    shared = InMemoryChatHistory()

    class Remembering(Agent):
        def chat_history(self) -> InMemoryChatHistory:
            return shared

    model_server.script([Turn(text="a"), Turn(text="b")])
    Remembering(provider=make_provider(model_server, "anthropic")).chat("one")
    Remembering(provider=make_provider(model_server, "anthropic")).chat("two")
    assert [m.role for m in shared.messages()] == ["user", "assistant", "user", "assistant"]
    assert len(model_server.requests[1].messages) == 3
