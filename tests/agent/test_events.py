"""Events: callbacks in order, live in sync and async runs, a broken callback cannot break a run,
logging, OpenTelemetry spans."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.agent.agent_tools import add, hang
from tests.agent.conftest import make_provider
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import ToolRuntime, tool
from toolfork.agent import (
    Agent,
    ModelCallFinished,
    ModelCallStarted,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    ToolRunFailed,
)


@tool
def counter(n: int, runtime: ToolRuntime) -> int:
    """Counts to n, reporting progress.

    Args:
        n: how far
    """
    for i in range(1, n + 1):
        runtime.emit_progress(i)
    return n


@tool
def quick(runtime: ToolRuntime) -> str:
    """Reports progress once, then returns."""
    runtime.emit_progress("halfway")
    return "quick done"


@tool
def waits_for(path: str, log: str) -> str:
    """Returns once ``path`` exists, or gives up after 15 s; notes in ``log`` that it returned.

    Args:
        path: the file to wait for
        log: the file to note the return in
    """
    deadline = time.monotonic() + 15
    outcome = "released"
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            outcome = "gave up"
            break
        time.sleep(0.01)
    with open(log, "a") as fh:
        fh.write(outcome + "\n")
    return outcome


def turns() -> list[Turn]:
    return [Turn(tool_calls=[ToolCallSpec("c1", "counter", {"n": 3}), ToolCallSpec("c2", "add", {"a": 1, "b": 2})]),
            Turn(text="counted")]


@pytest.mark.parametrize("parallel", [False, True])
def test_callbacks_see_model_and_tool_events_in_order(model_server: ScriptedModelServer, parallel: bool) -> None:
    seen: list[object] = []
    model_server.script(turns())
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[counter, add]) as agent:
        agent.parallel_tool_calls(parallel).observe(seen.append)
        assert agent.chat("count").text == "counted"
    kinds = [type(e).__name__ for e in seen]
    assert kinds[:2] == ["ModelCallStarted", "ModelCallFinished"]
    assert kinds[-1] == "RunFinished"
    progress = [e.value for e in seen if isinstance(e, ToolCallProgress)]
    assert progress == [1, 2, 3]
    for call_id in ("c1", "c2"):
        start = next(i for i, e in enumerate(seen) if isinstance(e, ToolCallStarted) and e.call_id == call_id)
        end = next(i for i, e in enumerate(seen) if isinstance(e, ToolCallFinished) and e.call_id == call_id)
        assert start < end
    assert any(isinstance(e, TextDelta) and e.text for e in seen), "observers get the streamed text"
    assert [e.step for e in seen if isinstance(e, ModelCallStarted)] == [1, 2]
    assert all(e.duration_s >= 0 for e in seen if isinstance(e, ModelCallFinished))


def test_a_raising_callback_is_logged_and_the_run_goes_on(model_server: ScriptedModelServer,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: object) -> None:
        raise RuntimeError("observer bug")

    model_server.script(turns())
    with caplog.at_level(logging.ERROR, logger="toolfork.agent"):
        with Agent(provider=make_provider(model_server, "openai-chat"), tools=[counter, add],
                   callbacks=[broken]) as agent:
            assert agent.chat("count").text == "counted"
    assert any("observer bug" in (r.exc_text or "") or "callback" in r.getMessage() for r in caplog.records)
    assert [r.content for r in model_server.requests[1].tool_results] == ["3", "3"]


def test_logging_reports_model_and_tool_calls(model_server: ScriptedModelServer,
                                              caplog: pytest.LogCaptureFixture) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 1, "b": 2}),
                                          ToolCallSpec("c2", "nope", {})]), Turn(text="ok")])
    with caplog.at_level(logging.DEBUG, logger="toolfork.agent"):
        with Agent(provider=make_provider(model_server, "anthropic"), tools=[add]) as agent:
            agent.chat("go")
    messages = [r.getMessage() for r in caplog.records if r.name == "toolfork.agent"]
    assert any(m.startswith("model call 1 to anthropic/claude-test: 2 tool call(s)") for m in messages)
    assert any(m.startswith("tool call c1 add: ok in ") for m in messages)
    assert any(m.startswith("tool call c2 nope: unknown-tool") for m in messages)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    yield exporter
    processor.shutdown()


def test_opentelemetry_span_per_model_call_and_per_tool_call(model_server: ScriptedModelServer,
                                                            spans: InMemorySpanExporter) -> None:
    model_server.script(turns())
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[counter, add]) as agent:
        agent.chat("count")
    # The executor makes the tool spans, under the agent's run span: one set, not two.
    mine = [s for s in spans.get_finished_spans()
            if s.instrumentation_scope.name in ("toolfork.agent", "toolfork.executor")]
    by_name: dict[str, list[object]] = {}
    for span in mine:
        by_name.setdefault(span.name, []).append(span)
    assert sorted(by_name) == ["chat claude-test", "execute_tool add", "execute_tool counter", "invoke_agent Agent"]
    assert len(by_name["chat claude-test"]) == 2
    run = by_name["invoke_agent Agent"][0]
    for span in mine:
        if span is not run:
            assert span.parent is not None and span.parent.span_id == run.context.span_id
    tool_span = by_name["execute_tool counter"][0]
    assert tool_span.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool_span.attributes["toolfork.call.status"] == "ok"
    assert tool_span.instrumentation_scope.name == "toolfork.executor"
    first_chat = min(by_name["chat claude-test"], key=lambda s: s.start_time)
    assert first_chat.attributes["toolfork.tool_calls"] == 2
    assert first_chat.attributes["gen_ai.usage.output_tokens"] > 0


def test_failed_tool_and_failed_run_spans_carry_error_status(model_server: ScriptedModelServer,
                                                            spans: InMemorySpanExporter, tmp_path: Path) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "hang", {"seconds": 30})])])
    with Agent(provider=make_provider(model_server, "openai-chat"), tools=[hang]) as agent:
        agent.parallel_tool_calls(True)
        with pytest.raises(ToolRunFailed):
            agent.chat("go")
    mine = {s.name: s for s in spans.get_finished_spans()
            if s.instrumentation_scope.name in ("toolfork.agent", "toolfork.executor")}
    assert mine["execute_tool hang"].status.status_code == trace.StatusCode.ERROR
    assert mine["execute_tool hang"].attributes["toolfork.call.status"] == "timeout"
    assert mine["execute_tool hang"].parent.span_id == mine["invoke_agent Agent"].context.span_id
    assert mine["invoke_agent Agent"].status.status_code == trace.StatusCode.ERROR


def test_stream_ends_with_run_finished(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(text="just text")])
    with Agent(provider=make_provider(model_server, "openai-responses")) as agent:
        events = list(agent.stream("hi"))
    assert isinstance(events[-1], RunFinished) and events[-1].message.text == "just text"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "just text"


def index_of(events: list[object], kind: type, call_id: str) -> int:
    for i, event in enumerate(events):
        if isinstance(event, kind) and getattr(event, "call_id", None) == call_id:
            return i
    raise AssertionError(f"no {kind.__name__} for {call_id} among {[type(e).__name__ for e in events]}")


@pytest.mark.parametrize("consume", ["achat", "astream"])
def test_async_fork_run_reports_a_quick_call_while_a_slower_one_still_runs(
        model_server: ScriptedModelServer, tmp_path: Path, consume: str) -> None:
    # The slow call only returns once the host has *seen* the quick call finish: that happens only
    # when the async driver delivers tool events live (else the slow call gives up after 15 s).
    release, log = tmp_path / "release", tmp_path / "returned.log"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "waits_for", {"path": str(release), "log": str(log)}),
                                          ToolCallSpec("c2", "quick", {})]),
                         Turn(text="both done")])
    observed: list[object] = []

    def observer(event: object) -> None:
        observed.append(event)
        if isinstance(event, ToolCallFinished) and event.call_id == "c2":
            release.touch()

    async def main() -> list[object]:
        async with Agent(provider=make_provider(model_server, "anthropic"), tools=[waits_for, quick],
                         callbacks=[observer]) as agent:
            agent.parallel_tool_calls(True)
            assert agent.executor.mode == "fork"
            if consume == "achat":
                assert (await agent.achat("go")).text == "both done"
                return observed
            return [e async for e in agent.astream("go")]

    events = asyncio.run(main())
    assert events == observed, "the async stream yields what the observers get"
    slow_end = index_of(events, ToolCallFinished, "c1")
    assert index_of(events, ToolCallStarted, "c1") < index_of(events, ToolCallProgress, "c2") \
        < index_of(events, ToolCallFinished, "c2") < slow_end
    progress = events[index_of(events, ToolCallProgress, "c2")]
    assert isinstance(progress, ToolCallProgress) and (progress.name, progress.value) == ("quick", "halfway")
    finished = events[slow_end]
    assert isinstance(finished, ToolCallFinished) and finished.output is not None
    assert finished.output.as_text() == "released"
    # Results still go back to the model in call order.
    assert [(r.call_id, r.content) for r in model_server.requests[1].tool_results] == \
        [("c1", "released"), ("c2", "quick done")]


def test_an_async_stream_left_mid_batch_cancels_the_running_call(model_server: ScriptedModelServer,
                                                                 tmp_path: Path) -> None:
    log = tmp_path / "returned.log"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "waits_for", {"path": str(tmp_path / "never"),
                                                                           "log": str(log)}),
                                          ToolCallSpec("c2", "quick", {})]),
                         Turn(text="fresh start")])

    async def main() -> tuple[list[str], list[str], str]:
        async with Agent(provider=make_provider(model_server, "openai-chat"), tools=[waits_for, quick]) as agent:
            agent.parallel_tool_calls(True)
            stream = agent.astream("go")
            async for event in stream:
                if isinstance(event, ToolCallFinished) and event.call_id == "c2":
                    break
            await stream.aclose()
            messages = agent.history.messages()
            statuses = [r.status for r in messages[2].results]
            return [m.role for m in messages], statuses, (await agent.achat("again")).text

    roles, statuses, reply = asyncio.run(main())
    # aclose() returned only after the batch ended: had the waiting call not been stopped, it
    # would have returned (and written its log) first.
    assert not log.exists(), "the call still running when the stream was left was cancelled"
    assert roles == ["user", "assistant", "tool"]
    assert statuses == ["not-executed", "not-executed"]
    assert reply == "fresh start"
    assert not model_server.failures
