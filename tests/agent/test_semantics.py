"""Agent semantics of issue 12 §2, through the real SDK providers against the scripted model server:
approval before frontend hand-off, hidden frontend tools, static and agent-wide approval, the
runtime's identity across processes, generator tools, on_tool_called / on_response_received, manual
tools, next-turn parameters, tools with nothing to run, and honest results for timeouts that cannot
be enforced."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.agent.agent_tools import add
from tests.agent.conftest import make_provider
from tests.agent.semantics_tools import countdown, escalate, slow_write, stages, whoami
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import Tool, ToolProperty, tool
from toolfork.agent import (
    Agent,
    AgentConfigError,
    ApprovalRequest,
    FrontendTool,
    ResumeError,
    ToolCallFinished,
    ToolCallProgress,
    ToolResultsRequest,
)

ASK = FrontendTool("ask_user", "Ask the user on their device.",
                   {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]})


def anthropic(server: ScriptedModelServer) -> Any:
    return make_provider(server, "anthropic")


def results_of(server: ScriptedModelServer, index: int) -> dict[str, str]:
    return {r.call_id: r.content for r in server.requests[index].tool_results}


# ---------------------------------------------------------------- frontend tools: approval, visibility
def test_frontend_tool_asks_for_approval_before_the_hand_off(model_server: ScriptedModelServer) -> None:
    camera = FrontendTool("take_photo", "Take a photo with the user's camera.",
                          approval_policy=lambda inputs: "uses the camera")
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "take_photo", {}), ToolCallSpec("c2", "take_photo", {}),
                                          ToolCallSpec("c3", "add", {"a": 1, "b": 2})]),
                         Turn(text="done")])
    with Agent(provider=anthropic(model_server), tools=[add, camera]) as agent:
        with pytest.raises(ApprovalRequest) as first:
            agent.chat("photo")
        assert [(c.id, c.kind, c.reason) for c in first.value.calls] == [("c1", "approval", "uses the camera"),
                                                                          ("c2", "approval", "uses the camera")]
        with pytest.raises(ToolResultsRequest) as handed:
            agent.resume({"c1": "approve", "c2": ("reject", "not now")})
        assert [(c.id, c.kind) for c in handed.value.calls] == [("c1", "frontend")]
        reply = agent.submit_tool_results({"c1": {"result": "photo.jpg"}})
    assert reply.text == "done"
    seen = results_of(model_server, 1)
    assert seen["c1"] == "photo.jpg" and seen["c3"] == "3"
    assert "Not executed: the user rejected this call: not now" in seen["c2"]


def test_a_hidden_frontend_tool_is_not_offered_nor_accepted(model_server: ScriptedModelServer) -> None:
    hidden = FrontendTool("secret_ui", "A UI action the model must not see.").visible(False)
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "secret_ui", {})]), Turn(text="ok")])
    with Agent(provider=anthropic(model_server), tools=[add, ASK, hidden]) as agent:
        assert agent.chat("go").text == "ok"
    assert model_server.requests[0].tools == ["add", "ask_user"]
    assert "Unknown tool 'secret_ui'" in results_of(model_server, 1)["c1"]


# ---------------------------------------------------------------- static and agent-wide approval
def test_static_and_agent_wide_approval(model_server: ScriptedModelServer) -> None:
    def echo(x: int) -> int:
        return x

    always = tool(name="always", description="Always asks.", approval_policy=True)(echo)
    never = tool(name="never", description="Never asks.", approval_policy=False)(echo)
    calls = [ToolCallSpec("c1", "add", {"a": 2, "b": 2}), ToolCallSpec("c2", "always", {"x": 1}),
             ToolCallSpec("c3", "never", {"x": 2}), ToolCallSpec("c4", "ask_user", {"question": "?"})]
    model_server.script([Turn(tool_calls=calls), Turn(text="fine")])
    # Agent-wide: every tool asks unless it has its own policy (never's False opts out).
    with Agent(provider=anthropic(model_server), tools=[add, always, never, ASK],
               approval_policy=lambda inputs: "agent-wide") as agent:
        with pytest.raises(ApprovalRequest) as info:
            agent.chat("go")
        assert [(c.id, c.reason) for c in info.value.calls] == [("c1", "agent-wide"), ("c2", None),
                                                                ("c4", "agent-wide")]
        reply = agent.resume({"c1": "approve", "c2": "approve", "c4": "reject"})
    assert reply.text == "fine"
    assert results_of(model_server, 1) == {"c1": "4", "c2": "1", "c3": "2",
                                           "c4": '{"error": "Not executed: the user rejected this call"}'}
    with pytest.raises(AgentConfigError, match="approval_policy must be True"):
        Agent(provider=anthropic(model_server), approval_policy="yes")


# ---------------------------------------------------------------- the runtime's identity, across processes
def test_runtime_carries_run_agent_step_and_call_into_forked_workers(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("w1", "whoami", {"note": "first"})]),
                         Turn(tool_calls=[ToolCallSpec("w2", "whoami", {"note": "second"})]),
                         Turn(text="bye")])
    with Agent(provider=anthropic(model_server), tools=[whoami], parallel=True, agent_id="agent-7") as agent:
        agent.executor.context["user"] = "ana"
        agent.chat("who")
        assert agent.executor.context == {"user": "ana"}, "the agent's reserved keys do not stay behind"
    first = json.loads(results_of(model_server, 1)["w1"])
    second = json.loads(results_of(model_server, 2)["w2"])
    assert first["pid"] != os.getpid() and second["pid"] != os.getpid()
    assert first["agent_id"] == second["agent_id"] == "agent-7"
    assert first["run_id"] == second["run_id"] and len(first["run_id"]) == 32
    assert (first["step_index"], second["step_index"]) == (0, 1)
    assert first["call"] == ["w1", "whoami", {"note": "first"}]
    assert first["context"] == ["user"], "the tool sees the user's context, not the agent's reserved keys"


# ---------------------------------------------------------------- generator tools
def test_generator_tools_stream_progress_from_workers_and_return_their_result(
        model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("g1", "countdown", {"n": 3}),
                                          ToolCallSpec("g2", "stages", {"n": 2})]),
                         Turn(text="launched")])
    with Agent(provider=anthropic(model_server), tools=[countdown, stages], parallel=True) as agent:
        events = list(agent.stream("launch"))
    progress: dict[str, list[Any]] = {}
    for event in events:
        if isinstance(event, ToolCallProgress):
            progress.setdefault(event.call_id, []).append(event.value)
    assert progress["g1"] == ["3 left", "2 left", "1 left"]
    assert [v["stage"] for v in progress["g2"]] == [0, 1] and progress["g2"][0]["pid"] != os.getpid()
    finished = {e.call_id: e for e in events if isinstance(e, ToolCallFinished)}
    assert finished["g1"].status == finished["g2"].status == "ok"
    seen = results_of(model_server, 1)
    assert seen["g1"] == "lift-off after 3", "the return value is the result, not '<generator object ...>'"
    assert json.loads(seen["g2"])["stage"] == 1, "an async generator's last value is its result"


# ---------------------------------------------------------------- on_tool_called, on_response_received, manual
class Verdict(BaseModel):
    ok: bool
    by: str


def test_on_tool_called_answers_at_once_or_hands_the_call_to_a_person(model_server: ScriptedModelServer,
                                                                        tmp_path: Path) -> None:
    ran = tmp_path / "ran"

    def deploy_fn(env: str) -> str:
        ran.write_text(env)
        return "deployed"

    deploy = Tool("deploy", "Deploy to an environment.", deploy_fn,
                  on_tool_called=lambda inputs: {"ok": True, "by": "auto"} if inputs["env"] == "staging" else None,
                  on_response_received=lambda value: {"ok": value == "yes", "by": "ops"},
                  output_model=Verdict)
    model_server.script([Turn(tool_calls=[ToolCallSpec("d1", "deploy", {"env": "staging"}),
                                          ToolCallSpec("d2", "deploy", {"env": "prod"})]),
                         Turn(text="deployed")])
    with Agent(provider=anthropic(model_server), tools=[deploy]) as agent:
        with pytest.raises(ToolResultsRequest) as info:
            agent.chat("ship it")
        assert [(c.id, c.kind) for c in info.value.calls] == [("d2", "hitl")] and info.value.kinds == ["hitl"]
        reply = agent.submit_tool_results({"d2": {"result": "yes"}})
    assert reply.text == "deployed"
    assert not ran.exists(), "on_tool_called decided for both calls: the tool itself never ran"
    seen = results_of(model_server, 1)
    assert json.loads(seen["d1"]) == {"ok": True, "by": "auto"}, "on_tool_called's value, output-checked"
    assert json.loads(seen["d2"]) == {"ok": True, "by": "ops"}


def test_on_response_received_can_refuse_and_the_run_stays_paused(model_server: ScriptedModelServer) -> None:
    def only_numbers(value: Any) -> int:
        if not str(value).isdigit():
            raise ValueError(f"{value!r} is not a number")
        return int(value) * 10

    rate = Tool.make("rate", "Ask a person for a rating.", manual=True, on_response_received=only_numbers)
    rate.add_property(ToolProperty("item", "string", "what to rate"))
    model_server.script([Turn(tool_calls=[ToolCallSpec("r1", "rate", {"item": "film"})]), Turn(text="rated")])
    with Agent(provider=anthropic(model_server), tools=[rate]) as agent:
        with pytest.raises(ToolResultsRequest) as info:
            agent.chat("rate it")
        assert [(c.id, c.kind) for c in info.value.calls] == [("r1", "manual")]
        with pytest.raises(ResumeError, match=r"call r1 \(rate\) was refused by on_response_received: "
                                              r"ValueError: 'great' is not a number"):
            agent.submit_tool_results({"r1": {"result": "great"}})
        assert agent.paused is info.value
        assert agent.submit_tool_results({"r1": {"result": "4"}}).text == "rated"
    assert results_of(model_server, 1) == {"r1": "40"}


def test_a_tool_with_nothing_to_run_is_refused_when_the_agent_is_built(model_server: ScriptedModelServer) -> None:
    bare = Tool.make("lookup", "Look something up.")
    with pytest.raises(AgentConfigError, match="tool 'lookup' has no callable"):
        Agent(provider=anthropic(model_server), tools=[add, bare])
    # A manual role, a hook, or a callable make it acceptable.
    Agent(provider=anthropic(model_server), tools=[Tool.make("lookup", "Look something up.", manual=True)])
    Agent(provider=anthropic(model_server), tools=[Tool.make("lookup", "L.", on_tool_called=lambda i: None)])
    Agent(provider=anthropic(model_server), tools=[bare.set_callable(lambda: "found")])


# ---------------------------------------------------------------- next-turn parameters
TOOL_CHOICE = {"anthropic": {"type": "tool", "name": "add"},
               "openai-chat": {"type": "function", "function": {"name": "add"}},
               "openai-responses": {"type": "function", "name": "add"}}


def test_a_tool_changes_the_next_model_request(model_server: ScriptedModelServer, flavour: str) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("e1", "escalate", {"level": 2})]),
                         Turn(tool_calls=[ToolCallSpec("a1", "add", {"a": 1, "b": 1})]),
                         Turn(text="two")])
    provider = make_provider(model_server, flavour)
    # Across processes in one flavour: what the tool asks rides back from the worker with its result.
    with Agent(provider=provider, instructions="Be helpful.", tools=[escalate, add],
               parallel=flavour == "anthropic") as agent:
        assert agent.chat("add").text == "two"
        assert escalate.name not in str(agent.executor.context)
    first, second, third = model_server.requests
    assert (second.model, second.body.get("temperature"), second.body.get("tool_choice")) == \
        ("bigger-model", 0.25, TOOL_CHOICE[flavour])
    assert "Answer in one word." in second.system and "Be helpful." not in second.system
    for plain in (first, third):  # only the one request after the batch
        assert plain.model == provider.model and "tool_choice" not in plain.body
        assert "temperature" not in plain.body and "Be helpful." in plain.system


# ---------------------------------------------------------------- honest results
@pytest.mark.parametrize("how", ["thread", "async"])
def test_a_timeout_that_cannot_be_enforced_gives_the_real_result(model_server: ScriptedModelServer,
                                                                 tmp_path: Path, how: str) -> None:
    target = tmp_path / "side-effect"
    model_server.script([Turn(tool_calls=[ToolCallSpec("s1", "slow_write", {"path": str(target)})]),
                         Turn(text="noted")])
    finished: list[ToolCallFinished] = []
    agent = Agent(provider=anthropic(model_server), tools=[slow_write],
                  callbacks=[lambda e: finished.append(e) if isinstance(e, ToolCallFinished) else None])
    outcome: list[Any] = []
    if how == "thread":  # sequential mode off the main thread: SIGALRM cannot stop the tool
        worker = threading.Thread(target=lambda: outcome.append(agent.chat("write")))
        worker.start()
        worker.join(30)
    else:
        outcome.append(asyncio.run(agent.achat("write")))
    agent.close()
    assert outcome and outcome[0].text == "noted"
    assert target.read_text() == "written", "the call ran to completion"
    seen = results_of(model_server, 1)["s1"]
    assert seen.startswith("wrote the file") and "past its timeout of 0.1s" in seen and "real result" in seen
    assert [(e.call_id, e.status) for e in finished] == [("s1", "ok")], "never reported as a timeout"


def test_a_manual_pause_and_next_turn_params_survive_a_json_round_trip(model_server: ScriptedModelServer) -> None:
    sign = Tool.make("sign", "A person signs the document.", manual=True)
    model_server.script([Turn(tool_calls=[ToolCallSpec("e1", "escalate", {"level": 1}),
                                          ToolCallSpec("s1", "sign", {})]),
                         Turn(text="signed")])
    with Agent(provider=anthropic(model_server), tools=[escalate, sign, add]) as first:
        with pytest.raises(ToolResultsRequest) as info:
            first.chat("sign it")
    text = info.value.to_json()
    fresh = Agent.resume_from(text, provider=anthropic(model_server), tools=[escalate, sign, add])
    with fresh:
        assert [(c.id, c.kind) for c in fresh.paused.calls] == [("s1", "manual")]  # type: ignore[union-attr]
        assert fresh.submit_tool_results({"s1": {"result": "signed by Ana"}}).text == "signed"
    after = model_server.requests[1]
    assert after.model == "bigger-model" and "Answer in one word." in after.system
    assert results_of(model_server, 1) == {"e1": "escalated to 1", "s1": "signed by Ana"}
