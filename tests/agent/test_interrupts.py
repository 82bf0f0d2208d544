"""Approval and frontend-tool pauses: what runs before the pause, resume in this process, in a
fresh agent from JSON, and in another process; the clear errors for bad answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.agent.agent_tools import add, transfer
from tests.agent.conftest import make_provider
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork.agent import (
    Agent,
    ApprovalRequest,
    FrontendTool,
    ModelCallStarted,
    ResumeError,
    RunFinished,
    RunPaused,
    SQLiteChatHistory,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolResultsRequest,
    UserMessage,
)

REPO = Path(__file__).resolve().parents[2]


def approval_batch(log: Path) -> Turn:
    return Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 1, "b": 2}),
                            ToolCallSpec("c2", "transfer", {"amount": 500, "log": str(log)}),
                            ToolCallSpec("c3", "transfer", {"amount": 5, "log": str(log)})])


def test_approval_pauses_after_the_other_calls_ran(model_server: ScriptedModelServer, provider,
                                                   tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    model_server.script([approval_batch(log), Turn(text="sent both")])
    with Agent(provider=provider, tools=[add, transfer]) as agent:
        with pytest.raises(ApprovalRequest) as info:
            agent.chat("pay")
        request = info.value
        assert [(c.id, c.name, c.arguments["amount"], c.reason) for c in request.calls] == \
            [("c2", "transfer", 500, "moves 500, more than 100")]
        assert agent.paused is request
        assert log.read_text().split() == ["5"], "the call that needs no approval ran before the pause"
        assert len(model_server.requests) == 1
        # Nothing of the paused turn is in the history yet: no dangling call.
        assert [m.role for m in agent.history.messages()] == ["user"]
        reply = agent.resume({"c2": "approve"})
    assert reply.text == "sent both"
    assert log.read_text().split() == ["5", "500"]
    results = model_server.requests[1].tool_results
    assert [(r.call_id, r.content) for r in results] == [("c1", "3"), ("c2", "sent 500"), ("c3", "sent 5")]


def test_rejection_with_a_reason_after_a_json_round_trip_into_a_fresh_agent(
        model_server: ScriptedModelServer, flavour: str, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    model_server.script([approval_batch(log), Turn(text="not sent")])
    with Agent(provider=make_provider(model_server, flavour), tools=[add, transfer]) as first:
        with pytest.raises(ApprovalRequest) as info:
            first.chat("pay")
    text = info.value.to_json()
    del first, info
    decisions = json.loads(json.dumps({"c2": ["reject", "over the daily limit"]}))  # as it arrives over JSON
    fresh = Agent.resume_from(text, provider=make_provider(model_server, flavour), tools=[add, transfer])
    with fresh:
        assert isinstance(fresh.paused, ApprovalRequest)
        assert fresh.resume(decisions).text == "not sent"
        assert [m.role for m in fresh.history.messages()] == ["user", "assistant", "tool", "assistant"]
    assert log.read_text().split() == ["5"]
    rejected = model_server.requests[1].tool_results[1]
    assert rejected.call_id == "c2"
    assert "Not executed: the user rejected this call: over the daily limit" in rejected.content


def test_resume_in_another_process(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    state_file = tmp_path / "state.json"
    model_server.script([approval_batch(log), Turn(text="approved elsewhere")])
    with Agent(provider=make_provider(model_server, "openai-chat"), tools=[add, transfer]) as agent:
        with pytest.raises(ApprovalRequest) as info:
            agent.chat("pay")
    state_file.write_text(info.value.to_json())
    script = textwrap.dedent(f"""
        from pathlib import Path
        from tests.agent.agent_tools import add, transfer
        from toolfork.agent import Agent
        from toolfork.agent.providers import OpenAI

        provider = OpenAI(model="gpt-test", api_key="k", base_url={model_server.openai_base_url!r}, max_retries=0)
        agent = Agent.resume_from(Path({str(state_file)!r}).read_text(), provider=provider, tools=[add, transfer])
        print("REPLY:" + agent.resume({{"c2": "approve"}}).text)
        print("PID:" + str(__import__("os").getpid()))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "REPLY:approved elsewhere" in done.stdout
    assert f"PID:{os.getpid()}" not in done.stdout
    assert log.read_text().split() == ["5", "500"]
    assert [r.content for r in model_server.requests[1].tool_results] == ["3", "sent 500", "sent 5"]


def test_bad_decisions_are_clear_errors(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    model_server.script([approval_batch(log), Turn(text="ok")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add, transfer]) as agent:
        with pytest.raises(ResumeError, match="no run is paused waiting for approval"):
            agent.resume({"c2": "approve"})
        with pytest.raises(ApprovalRequest):
            agent.chat("pay")
        with pytest.raises(ResumeError, match="unknown call id\\(s\\) in approval decisions: c9; the run waits on: c2"):
            agent.resume({"c2": "approve", "c9": "approve"})
        with pytest.raises(ResumeError, match="lack call id\\(s\\): c2"):
            agent.resume({})
        with pytest.raises(ResumeError, match="decision for call c2 must be"):
            agent.resume({"c2": "maybe"})
        with pytest.raises(ResumeError, match="waits for ApprovalRequest"):
            agent.submit_tool_results({"c2": {"result": 1}})
        # The bad answers changed nothing: a good one still works.
        assert agent.resume({"c2": "approve"}).text == "ok"
        with pytest.raises(ResumeError, match="c2 were answered already"):
            agent.resume({"c2": "approve"})


def test_resume_from_rejects_bad_state_and_missing_tools(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    model_server.script([approval_batch(log)])
    provider = make_provider(model_server, "anthropic")
    with Agent(provider=provider, tools=[add, transfer]) as agent:
        with pytest.raises(ApprovalRequest) as info:
            agent.chat("pay")
    with pytest.raises(ResumeError, match="not valid JSON"):
        Agent.resume_from("{not json", provider=provider)
    with pytest.raises(ResumeError, match="lacks 'kind' and 'run'"):
        Agent.resume_from("{}", provider=provider)
    with pytest.raises(ResumeError, match="no pending turn"):
        Agent.resume_from('{"kind": "approval", "run": {"pending": null}, "version": 1}', provider=provider)
    wrong_version = {**info.value.to_dict(), "version": 99}
    with pytest.raises(ResumeError, match="version 99 is not supported"):
        Agent.resume_from(json.dumps(wrong_version), provider=provider)
    keep = Agent(provider=provider, tools=[add])
    keep.history.extend([UserMessage("earlier")])
    with pytest.raises(ResumeError, match="tool 'transfer', which this agent does not have"):
        keep.resume_from(info.value.to_json())
    assert [m.text for m in keep.history.messages()] == ["earlier"], "a refused restore changes nothing"
    assert isinstance(RunPaused.from_json(info.value.to_json()), ApprovalRequest)


ASK_COLOUR = FrontendTool(
    name="ask_user",
    description="Ask the user a question in the UI.",
    input_schema={"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
)


def frontend_batch() -> Turn:
    return Turn(tool_calls=[ToolCallSpec("c1", "ask_user", {"question": "favourite colour?"}),
                            ToolCallSpec("c2", "add", {"a": 2, "b": 2}),
                            ToolCallSpec("c3", "ask_user", {"question": "why?"})])


def test_frontend_tool_pauses_and_submitted_results_resume(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([frontend_batch(), Turn(text="blue, because")])
    with Agent(provider=provider, tools=[add, ASK_COLOUR]) as agent:
        with pytest.raises(ToolResultsRequest) as info:
            agent.chat("ask me")
        assert [(c.id, c.arguments["question"]) for c in info.value.calls] == \
            [("c1", "favourite colour?"), ("c3", "why?")]
        assert sorted(model_server.requests[0].tools) == ["add", "ask_user"]
        reply = agent.submit_tool_results({"c1": {"result": "blue"}, "c3": {"error": "the user closed the dialog"}})
    assert reply.text == "blue, because"
    results = model_server.requests[1].tool_results
    assert [(r.call_id, r.content) for r in results] == [
        ("c1", "blue"), ("c2", "4"), ("c3", '{"error": "the user closed the dialog"}')]


def test_frontend_submission_errors(model_server: ScriptedModelServer) -> None:
    model_server.script([frontend_batch(), Turn(text="done")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add, ASK_COLOUR]) as agent:
        with pytest.raises(ToolResultsRequest):
            agent.chat("ask me")
        with pytest.raises(ResumeError, match="unknown call id\\(s\\) in tool results: c2; the run waits on: c1, c3"):
            agent.submit_tool_results({"c1": {"result": 1}, "c2": {"result": 2}, "c3": {"result": 3}})
        with pytest.raises(ResumeError, match="lack call id\\(s\\): c3"):
            agent.submit_tool_results({"c1": {"result": "blue"}})
        with pytest.raises(ResumeError, match="must be \\{'result': value\\} or \\{'error': 'message'\\}"):
            agent.submit_tool_results({"c1": "blue", "c3": {"result": "x"}})
        agent.submit_tool_results({"c1": {"result": "blue"}, "c3": {"result": "x"}})
        with pytest.raises(ResumeError, match="c1, c3 were answered already"):
            agent.submit_tool_results({"c1": {"result": "red"}, "c3": {"result": "y"}})


def test_a_stale_state_resumed_twice_over_a_shared_history_is_refused(model_server: ScriptedModelServer,
                                                                     tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite"
    model_server.script([frontend_batch(), Turn(text="done")])
    provider = make_provider(model_server, "openai-responses")
    with Agent(provider=provider, tools=[add, ASK_COLOUR], history=SQLiteChatHistory(db, "t1")) as agent:
        with pytest.raises(ToolResultsRequest) as info:
            agent.chat("ask me")
    state = info.value.to_json()
    assert json.loads(state)["history"] is None, "a persistent history is not copied into the state"
    answer = {"c1": {"result": "blue"}, "c3": {"result": "because"}}
    first = Agent.resume_from(state, provider=provider, tools=[add, ASK_COLOUR], history=SQLiteChatHistory(db, "t1"))
    assert first.submit_tool_results(answer).text == "done"
    second = Agent.resume_from(state, provider=provider, tools=[add, ASK_COLOUR],
                               history=SQLiteChatHistory(db, "t1"))
    with pytest.raises(ResumeError, match="resumed before"):
        second.submit_tool_results({"c1": {"result": "green"}, "c3": {"result": "why not"}})
    roles = [m.role for m in SQLiteChatHistory(db, "t1").messages()]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_approval_then_frontend_in_one_batch(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "ask_user", {"question": "sure?"}),
                                          ToolCallSpec("c2", "transfer", {"amount": 900, "log": str(log)})]),
                         Turn(text="all done")])
    provider = make_provider(model_server, "anthropic")
    with Agent(provider=provider, tools=[transfer, ASK_COLOUR]) as agent:
        with pytest.raises(ApprovalRequest):
            agent.chat("go")
        with pytest.raises(ToolResultsRequest) as frontend:
            agent.resume({"c2": "approve"})
        assert log.read_text().split() == ["900"]
        fresh = Agent.resume_from(frontend.value.to_json(), provider=provider, tools=[transfer, ASK_COLOUR])
        assert fresh.submit_tool_results({"c1": {"result": "yes"}}).text == "all done"
    assert [r.content for r in model_server.requests[1].tool_results] == ["yes", "sent 900"]


def test_frontend_arguments_are_validated_against_its_schema(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "ask_user", {"question": 42})]), Turn(text="retry")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[ASK_COLOUR]) as agent:
        assert agent.chat("go").text == "retry"
    message = json.loads(model_server.requests[1].tool_results[0].content)["error"]
    assert message == "Invalid arguments for tool 'ask_user': question: expected string, got int"


def test_async_resume_and_events_for_rejected_and_submitted_calls(model_server: ScriptedModelServer,
                                                                  tmp_path: Path) -> None:
    import asyncio

    from toolfork.agent import ToolCallFinished

    log = tmp_path / "transfers.log"
    seen: list[ToolCallFinished] = []
    model_server.script([approval_batch(log), Turn(text="partly"), frontend_batch(), Turn(text="answered")])

    async def main() -> tuple[str, str]:
        with Agent(provider=make_provider(model_server, "anthropic"), tools=[add, transfer, ASK_COLOUR],
                   callbacks=[lambda e: seen.append(e) if isinstance(e, ToolCallFinished) else None]) as agent:
            with pytest.raises(ApprovalRequest):
                await agent.achat("pay")
            first = await agent.aresume({"c2": ("reject", "no")})
            with pytest.raises(ToolResultsRequest):
                await agent.achat("ask")
            second = await agent.asubmit_tool_results({"c1": {"result": "blue"}, "c3": {"result": "because"}})
        return first.text, second.text

    assert asyncio.run(main()) == ("partly", "answered")
    statuses = [(e.call_id, e.status) for e in seen]
    assert statuses[:3] == [("c1", "ok"), ("c3", "ok"), ("c2", "rejected")]
    assert sorted(statuses[3:]) == [("c1", "ok"), ("c2", "ok"), ("c3", "ok")]
    assert "sent 5" == model_server.requests[1].tool_results[2].content


def tool_events(events: list[object]) -> list[tuple[str, str, str]]:
    return [(type(e).__name__, e.call_id, e.output.as_text() if isinstance(e, ToolCallFinished) and e.output
             else "") for e in events if isinstance(e, (ToolCallStarted, ToolCallFinished))]


def test_streaming_resume_yields_the_resumed_runs_tool_events_and_text(model_server: ScriptedModelServer,
                                                                      provider, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    model_server.script([approval_batch(log), Turn(text="sent both transfers")])
    with Agent(provider=provider, tools=[add, transfer]) as agent:
        with pytest.raises(ApprovalRequest):
            list(agent.stream("pay"))
        events = list(agent.resume_stream({"c2": "approve"}))
    # Only the approved call runs now; c1 and c3 were reported before the pause.
    assert tool_events(events) == [("ToolCallStarted", "c2", ""), ("ToolCallFinished", "c2", "sent 500")]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "sent both transfers"
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    assert finished < next(i for i, e in enumerate(events) if isinstance(e, ModelCallStarted)) \
        < next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert isinstance(events[-1], RunFinished) and events[-1].message.text == "sent both transfers"
    assert model_server.requests[1].stream, "the resumed model call was streamed"
    assert log.read_text().split() == ["5", "500"]
    assert [r.content for r in model_server.requests[1].tool_results] == ["3", "sent 500", "sent 5"]


def test_streaming_submission_checks_the_answer_on_first_iteration(model_server: ScriptedModelServer) -> None:
    model_server.script([frontend_batch(), Turn(text="blue it is")])
    with Agent(provider=make_provider(model_server, "openai-chat"), tools=[add, ASK_COLOUR]) as agent:
        with pytest.raises(ToolResultsRequest) as info:
            agent.chat("ask me")
        bad = agent.submit_tool_results_stream({"c1": {"result": "blue"}})
        assert agent.paused is info.value, "nothing happens before the stream is iterated"
        with pytest.raises(ResumeError, match="lack call id\\(s\\): c3"):
            next(bad)
        assert agent.paused is info.value, "a refused answer leaves the run paused"
        events = list(agent.submit_tool_results_stream({"c1": {"result": "blue"}, "c3": {"error": "closed"}}))
    assert tool_events(events) == [("ToolCallFinished", "c1", "blue"),
                                   ("ToolCallFinished", "c3", '{"error": "closed"}')]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "blue it is"
    assert isinstance(events[-1], RunFinished)


def test_async_streaming_resume_and_submission(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    import asyncio

    log = tmp_path / "transfers.log"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "ask_user", {"question": "sure?"}),
                                          ToolCallSpec("c2", "transfer", {"amount": 900, "log": str(log)})]),
                         Turn(text="all done")])

    async def main() -> tuple[list[object], list[object]]:
        async with Agent(provider=make_provider(model_server, "anthropic"), tools=[transfer, ASK_COLOUR]) as agent:
            agent.parallel_tool_calls(True)
            with pytest.raises(ApprovalRequest):
                await agent.achat("go")
            resumed: list[object] = []
            with pytest.raises(ToolResultsRequest):  # the same batch pauses again, for the frontend call
                async for event in agent.aresume_stream({"c2": "approve"}):
                    resumed.append(event)
            submitted = [e async for e in agent.asubmit_tool_results_stream({"c1": {"result": "yes"}})]
        return resumed, submitted

    resumed, submitted = asyncio.run(main())
    assert tool_events(resumed) == [("ToolCallStarted", "c2", ""), ("ToolCallFinished", "c2", "sent 900")]
    assert tool_events(submitted) == [("ToolCallFinished", "c1", "yes")]
    assert "".join(e.text for e in submitted if isinstance(e, TextDelta)) == "all done"
    assert isinstance(submitted[-1], RunFinished) and submitted[-1].message.text == "all done"
    assert log.read_text().split() == ["900"]
    assert [r.content for r in model_server.requests[1].tool_results] == ["yes", "sent 900"]
