"""Ray mode carries the call whole too: its ``meta`` reaches the tool in the Ray worker, and the spans the
tool starts there come back with its result, under its call's span (one Ray test: Ray is slow to start)."""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.executor.conftest_ray import ray_cluster  # noqa: F401 - a fixture
from tests.observability.tools_traced import show_meta, traced_work
from toolfork.executor import Executor, ToolCall

pytestmark = pytest.mark.ray  # in one of the Ray xdist groups (tests/conftest.py, RayGroups)


def test_meta_and_the_tools_spans_cross_to_ray_workers(ray_cluster: object,  # noqa: F811 - the fixture
                                                       spans: InMemorySpanExporter) -> None:
    with Executor([show_meta, traced_work], mode="ray", workers=2) as ex, \
            trace.get_tracer("tests").start_as_current_span("ray batch") as batch:
        meta_result, traced = ex.run([ToolCall("m", "show_meta", {}, meta={"tenant": "acme"}),
                                      ToolCall("t", "traced_work", {"label": "ray"})])
    assert meta_result.ok and json.loads(meta_result.output.content[0].text) == {"tenant": "acme"}
    assert traced.ok, traced.error
    found = {s.name: s for s in spans.get_finished_spans()}
    call, outer, inner = found["execute_tool traced_work"], found["outer ray"], found["inner ray"]
    root = batch.get_span_context()
    assert call.parent.span_id == root.span_id and call.context.trace_id == root.trace_id
    assert outer.parent.span_id == call.context.span_id and inner.parent.span_id == outer.context.span_id
    assert outer.context.trace_id == root.trace_id
    assert outer.attributes["tool.pid"] == traced.worker_pid == call.attributes["toolfork.worker.pid"]
