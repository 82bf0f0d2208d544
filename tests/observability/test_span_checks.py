"""What the host fixes in every span a worker sends, warm calls included: a span no exporter could
encode (a timestamp before the epoch, an end before its start, an int past 64 bits, a lone surrogate)
is dropped and counted (``tracing.dropped_spans``, the ``toolfork.spans.dropped`` counter), never
exported; the SDK's span limits are applied; a warm (trusted) tool's ids, parents, scope and
timestamps are otherwise its own. A sandboxed call's spans are rebound: tests/redteam/sandbox/test_spans.py."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.observability.test_metrics_otel import reader, values  # noqa: F401  (the fixture)
from toolfork.executor import Executor, ToolCall, metering, tracing
from toolfork.tools import Tool
from toolfork.tools.runtime import ToolRuntime

FOREIGN_TRACE = "ab" * 16


def _span(name: str, start: int, end: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "trace_id": FOREIGN_TRACE, "span_id": "12" * 8, "flags": 1, "parent_id": "34" * 8,
            "start": start, "end": end, "kind": 0, "status": 0, "status_description": None, "attributes": {},
            "events": [], "scope": "my.lib", "scope_version": "1", **extra}


def warm_spans(runtime: ToolRuntime) -> str:
    """Send spans of the tool's own making (a trusted tool may shape its spans), some malformed."""
    from toolfork.executor.wire import frames

    now = time.time_ns()
    spans = [_span("shaped", now - 10**9, now, attributes={f"a{i}": i for i in range(1000)}),
             _span("before the epoch", -5, now), _span("ends first", now, now - 1),
             _span("huge int", now, now, attributes={"n": 1 << 63}), _span("surrogate \ud800", now, now)]
    runtime._writer.send(frames.spans_frame(runtime._seq, spans))  # type: ignore[attr-defined]
    return "sent"


def test_a_warm_calls_malformed_spans_are_dropped_and_counted_the_rest_kept_as_shaped(
        simple_spans: InMemorySpanExporter, reader: Any) -> None:  # noqa: F811
    before = tracing.dropped_spans()
    with Executor([Tool("warm", fn=warm_spans, description="sends spans")], mode="fork", workers=1) as ex:
        (result,) = ex.run([ToolCall("w", "warm", {})])
    assert result.status == "ok", result
    exported = {s.name: s for s in simple_spans.get_finished_spans()}
    assert "execute_tool warm" in exported
    assert not {"before the epoch", "ends first", "huge int", "surrogate \ud800"} & set(exported)
    assert tracing.dropped_spans() - before == 4
    assert values(reader, metering.SPANS_DROPPED)[()] >= 4
    shaped = exported["shaped"]
    assert f"{shaped.context.trace_id:032x}" == FOREIGN_TRACE and shaped.instrumentation_scope.name == "my.lib"
    assert len(shaped.attributes) == 128 and shaped.dropped_attributes == 872  # the SDK's default limit
    assert shaped.attributes["a999"] == 999  # the latest kept, as the SDK keeps them


def test_binding_keeps_the_tools_tree_inside_the_call_and_nothing_of_an_untraced_call() -> None:
    from toolfork.executor.tracing import confine, spandata

    def checked(span_id: str, parent: str | None, start: int, end: int) -> spandata.Checked:
        span = spandata.check({**_span(span_id, start, end), "span_id": span_id, "parent_id": parent})
        assert span is not None
        return span

    # in the order spans end: a child before its parent; "b0" names as parent a span that ended before it
    spans = [checked("c0" * 8, "a0" * 8, 5, 50), checked("b0" * 8, "c0" * 8, 60, 70), checked("a0" * 8, None, 1, 900)]
    bound = confine.bind(spans, confine.CallWindow((7, 99, 1), 10, 100))
    child, late, parent = bound
    assert {s.trace_id for s in bound} == {7} and {s.scope for s in bound} == {confine.SCOPE}
    assert len({s.span_id for s in bound} | {99}) == 4 and not {s.span_id for s in bound} & {0xc0c0c0c0c0c0c0c0}
    assert child.parent_id == parent.span_id and parent.parent_id == 99 and late.parent_id == 99
    assert (child.start, child.end, parent.start, parent.end) == (10, 50, 10, 100)  # clamped into 10..100
    assert confine.bind(spans, confine.CallWindow(None, 10, 100)) == []
