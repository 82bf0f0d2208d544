"""A session's calls are traced and counted as any call: one ``execute_tool`` span each under the span
current at ``s.run`` (a call that crashed the session's process, or was not run because the session was
lost, included), the tool's own spans from the session's process under it, and every result counted in
``Executor.stats()`` and the OpenTelemetry metrics. With the real SDK: in-memory exporter and reader."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.executor.conftest_ray import ray_cluster  # noqa: F401 - a fixture, for the Ray case
from tests.observability.test_metrics_otel import calls_key, delta, global_reader, points, values
from tests.observability.test_tracing import _calls, _check_tool_spans, _named, _under
from tests.observability.tools_traced import TOOLS
from toolfork.executor import Executor, ToolCall, metering

tracer = trace.get_tracer("tests.observability.sessions")

CALLS = [ToolCall("s1", "traced_work", {"label": "one"}), ToolCall("s2", "no_such_tool", {}),
         ToolCall("s3", "traced_work", {"label": "two"}), ToolCall("s4", "die", {}),
         ToolCall("s5", "traced_work", {"label": "three"})]


@pytest.mark.parametrize("mode", ["fork", "sequential", pytest.param("ray", marks=pytest.mark.ray)])
def test_each_session_call_gets_its_span_under_the_run_and_the_tools_spans_under_it(
        spans: InMemorySpanExporter, mode: str, request: pytest.FixtureRequest) -> None:
    if mode == "ray":  # the suite's Ray instance (tests/executor/conftest_ray.py), in the Ray xdist group
        request.getfixturevalue("ray_cluster")
    # a crash in the host is the host's
    calls = CALLS if mode != "sequential" else [c for c in CALLS if c.name != "die"]
    with Executor(TOOLS, mode=mode, workers=1) as ex, ex.session(dict) as s:
        with tracer.start_as_current_span("episode"):
            results = s.run(calls)
        pid = s.pid if mode == "sequential" else results[0].worker_pid
    statuses = {r.call_id: r.status for r in results}
    assert statuses == {"s1": "ok", "s2": "error", "s3": "ok", **({"s4": "crashed", "s5": "error"}
                                                                   if mode != "sequential" else {"s5": "ok"})}
    episode = _named(spans, "episode")
    by_id = _calls(spans)
    assert sorted(by_id) == sorted(c.id for c in calls)
    assert all(_under(span, episode) for span in by_id.values())
    for call_id, label in (("s1", "one"), ("s3", "two")):
        assert by_id[call_id].attributes["toolfork.worker.pid"] == pid
        assert by_id[call_id].status.status_code != StatusCode.ERROR
        _check_tool_spans(spans, by_id[call_id], label)
    assert by_id["s2"].status.status_code == StatusCode.ERROR
    if mode != "sequential":
        assert by_id["s4"].attributes["toolfork.call.status"] == "crashed"
        assert by_id["s5"].attributes["error.type"] == "SessionLost"


def test_arun_puts_the_calls_under_the_awaiting_tasks_span(spans: InMemorySpanExporter) -> None:
    async def episode(s: Any) -> None:
        with tracer.start_as_current_span("async episode"):
            await s.arun([ToolCall("a1", "traced_work", {"label": "async"})])

    with Executor(TOOLS, mode="fork", workers=1) as ex, ex.session(dict) as s:
        asyncio.run(episode(s))
    call = _calls(spans)["a1"]
    assert _under(call, _named(spans, "async episode"))
    _check_tool_spans(spans, call, "async")


def test_session_calls_are_counted_in_stats_and_the_metrics() -> None:
    with global_reader() as reader:
        assert metering.recorder() is not None
        before = values(reader, metering.CALLS)
        with Executor(TOOLS, mode="fork", workers=1) as ex:
            with ex.session(dict) as s:
                s.run(CALLS)
            counted = dict(ex.stats().calls)
            assert counted == {("traced_work", "ok"): 2, ("(unknown)", "error"): 1, ("die", "crashed"): 1,
                               ("traced_work", "error"): 1}
            durations = {k: p.count for k, p in points(reader)[metering.CALL_DURATION].items()}
        assert delta(values(reader, metering.CALLS), before) == {
            calls_key("traced_work", "ok"): 2, calls_key("(unknown)", "error"): 1, calls_key("die", "crashed"): 1,
            calls_key("traced_work", "error"): 1}
    assert durations[calls_key("traced_work", "ok")] >= 2 and durations[calls_key("die", "crashed")] >= 1
