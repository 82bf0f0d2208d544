"""Spans a sandboxed call forges, exported by a host that traces with the real OpenTelemetry SDK: each
scenario runs a hostile sandboxed tool beside a harmless warm one in one traced batch, collects what
the host's span processor received (an ``InMemorySpanExporter``), and encodes all of it at once with the
OTLP exporter's encoder, as a batch exporter would. It reports; the test asserts.

Run by ``tests/redteam/sandbox/test_spans.py`` as root and as nobody
(``python -m tests.redteam.sandbox.telemetry NAME WORKDIR``, printing the evidence as JSON).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolfork import Limits
from toolfork.executor import Executor
from toolfork.tools.runtime import ToolRuntime
from toolfork.tools.tool import Tool

Evidence = dict[str, Any]
FOREIGN_TRACE = "ab" * 16  # another tenant's trace
FOREIGN_PARENT = "cd" * 8
FORGED_IDS = ["11" * 8, "22" * 8, "33" * 8, "44" * 8]
YEAR_2100 = 4_102_444_800 * 10**9


def _span(name: str, span_id: str, parent: str | None, start: int, end: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "trace_id": FOREIGN_TRACE, "span_id": span_id, "flags": 1, "parent_id": parent,
            "start": start, "end": end, "kind": 0, "status": 0, "status_description": None, "attributes": {},
            "events": [], "scope": "toolfork.executor", "scope_version": None, **extra}


def forge_spans(runtime: ToolRuntime) -> str:
    """Send, in place of its own spans, spans of the tool's choosing (what a SPANS frame may carry)."""
    from toolfork.executor.wire import frames

    now = time.time_ns()
    spans = [
        _span("child of the forged span", FORGED_IDS[1], FORGED_IDS[0], now - 10**12, YEAR_2100),  # ends first
        _span("execute_tool transfer_funds", FORGED_IDS[0], FOREIGN_PARENT, now - 5000, now,
              attributes={f"a{i}": "x" * 10_000 for i in range(1000)},
              events=[[f"e{i}", now, {}] for i in range(1000)]),
        _span("starts before the epoch", FORGED_IDS[2], None, -5, now),
        _span("loops", FORGED_IDS[3], FORGED_IDS[3], now, now),  # its own parent
    ]
    writer, seq = runtime._writer, runtime._seq  # type: ignore[attr-defined]
    writer.send(frames.spans_frame(seq, spans))
    return "forged"


def good_span(label: str) -> str:
    """A well-formed span of the tool's own (another tenant's call, beside the hostile one)."""
    from opentelemetry import trace

    with trace.get_tracer("tests.redteam.tenant").start_as_current_span(f"good {label}"):
        pass
    return "good"


def _ids(span: Any) -> dict[str, Any]:
    scope = span.instrumentation_scope
    return {"name": span.name, "trace_id": f"{span.context.trace_id:032x}", "span_id": f"{span.context.span_id:016x}",
            "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
            "scope": None if scope is None else scope.name, "start": span.start_time, "end": span.end_time,
            "attributes": len(span.attributes or {}), "dropped_attributes": span.dropped_attributes,
            "events": len(span.events), "longest_value": max((len(str(v)) for v in (span.attributes or {}).values()),
                                                             default=0)}


def s_forged_spans(work: Path) -> Evidence:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolfork.executor import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tools = [Tool("hostile", fn=forge_spans, limits=Limits(sandbox=True)), Tool("tenant", fn=good_span)]
    dropped = getattr(tracing, "dropped_spans", lambda: 0)  # (a tree without the count reports none)
    dropped_before = dropped()
    try:
        with Executor(tools, workers=2, timeout=60) as ex, \
                trace.get_tracer("tests.redteam.host").start_as_current_span("batch"):
            results = ex.run([{"id": "h", "name": "hostile", "arguments": {}},
                              {"id": "t", "name": "tenant", "arguments": {"label": "t"}}])
        finished = exporter.get_finished_spans()
        try:
            from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

            encode_spans(finished)  # every span in one batch, as a batch exporter sends them
            otlp = "encoded"
        except ImportError:
            otlp = "not installed"
        except Exception as exc:  # what made the OTLP exporter drop the whole batch
            otlp = f"{type(exc).__name__}: {exc}"
    finally:
        provider.shutdown()
    return {"statuses": [r.status for r in results], "spans": [_ids(s) for s in finished], "otlp": otlp,
            "dropped": dropped() - dropped_before}


SCENARIOS: dict[str, Callable[[Path], Evidence]] = {
    name.removeprefix("s_"): fn for name, fn in list(globals().items()) if name.startswith("s_") and callable(fn)
}


if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2]))))
