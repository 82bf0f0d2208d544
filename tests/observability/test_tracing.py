"""Tracing across the fork: with the OpenTelemetry SDK in the host, every call gets one ``execute_tool``
span under the span current where it was submitted, the spans a tool starts in its worker come back
under its call's span to the host's exporters, and the host ends the spans of calls it killed or lost.
No exporter thread ever runs in a worker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.observability.tools_traced import TOOLS, traced_body
from toolfork.executor import Executor, ToolCall
from toolfork.governance import Limits
from toolfork.tools import Tool

ROOT = Path(__file__).resolve().parents[2]
tracer = trace.get_tracer("tests.observability.host")


def _named(exporter: InMemorySpanExporter, name: str) -> Any:
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, (name, [s.name for s in exporter.get_finished_spans()])
    return found[0]


def _calls(exporter: InMemorySpanExporter) -> dict[str, Any]:
    """The execute_tool spans, by call id (each call has exactly one)."""
    found: dict[str, Any] = {}
    for span in exporter.get_finished_spans():
        if span.name.startswith("execute_tool "):
            call_id = span.attributes["gen_ai.tool.call.id"]
            assert call_id not in found, f"two spans for call {call_id}"
            found[call_id] = span
    return found


def _under(child: Any, parent: Any) -> bool:
    return child.parent is not None and child.parent.span_id == parent.context.span_id and \
        child.context.trace_id == parent.context.trace_id


def _check_tool_spans(exporter: InMemorySpanExporter, call: Any, label: str, *, own_pid_space: bool = False) -> None:
    """The tool's own two spans, made in its worker: under its call's span, whole."""
    outer, inner = _named(exporter, f"outer {label}"), _named(exporter, f"inner {label}")
    assert _under(outer, call) and _under(inner, outer)
    # a sandbox is a PID namespace of its own: there the tool is process 1
    assert outer.attributes["tool.pid"] == (1 if own_pid_space else call.attributes["toolfork.worker.pid"])
    assert [e.name for e in inner.events] == ["halfway"] and inner.attributes["tool.list"] == (1, 2, 3)
    # a sandboxed call's spans are data about it: in a scope of their own, whatever the tool named
    assert inner.instrumentation_scope.name == ("sandboxed-tool" if own_pid_space else "tests.observability")
    assert call.start_time <= outer.start_time <= inner.start_time <= inner.end_time <= outer.end_time <= call.end_time


def _threads(result: Any) -> int:
    assert result.status == "ok", (result.status, result.error)
    return int(json.loads(result.output.content[0].text)["threads"])


def test_one_trace_per_batch_with_every_call_under_the_submitting_span(spans: InMemorySpanExporter) -> None:
    outcome: list[Any] = []
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        def batch() -> None:
            with tracer.start_as_current_span("batch from a thread"):
                outcome.extend(ex.run([ToolCall(f"c{i}", "traced_work", {"label": str(i)}) for i in range(4)]
                                      + [ToolCall("u", "no_such_tool", {})]))

        thread = threading.Thread(target=batch)
        thread.start()
        thread.join(60)
    assert [r.status for r in outcome] == ["ok"] * 4 + ["error"]
    root = _named(spans, "batch from a thread")
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {root.context.trace_id}  # one trace
    calls = _calls(spans)
    assert sorted(calls) == ["c0", "c1", "c2", "c3", "u"]
    for call_id, call in calls.items():
        assert _under(call, root)
        assert call.attributes["gen_ai.operation.name"] == "execute_tool"
        assert call.attributes["toolfork.call.wait_s"] >= 0
        if call_id != "u":
            assert call.name == "execute_tool traced_work"
            assert call.attributes["toolfork.call.status"] == "ok" and call.status.status_code == StatusCode.UNSET
            _check_tool_spans(spans, call, call_id[1:])
    unknown = calls["u"]
    assert unknown.status.status_code == StatusCode.ERROR and unknown.attributes["toolfork.call.status"] == "error"
    assert all(_threads(r) == 1 for r in outcome[:4])  # no exporter thread in a worker, ever


def test_calls_from_asyncio_tasks_and_single_submits_are_under_their_own_spans(spans: InMemorySpanExporter) -> None:
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        async def one(label: str) -> Any:
            with tracer.start_as_current_span(f"task {label}"):
                return await ex.acall(ToolCall(label, "traced_work", {"label": label}))

        async def batch() -> Any:
            with tracer.start_as_current_span("task arun"):
                return await ex.arun([ToolCall("r", "traced_work", {"label": "r"})])

        async def main() -> list[Any]:
            return list(await asyncio.gather(one("a"), one("b"), batch()))

        results = asyncio.run(main())
        with tracer.start_as_current_span("submitter"):
            future = ex.submit(ToolCall("s", "traced_work", {"label": "s"}))
        assert future.result(60).ok
        with tracer.start_as_current_span("streamer"):
            events = ex.stream([ToolCall("st", "traced_work", {"label": "st"})])
        list(events)  # consumed outside the span: the parent is where the batch was made
        with tracer.start_as_current_span("imapper"):
            mapped = ex.imap([ToolCall("im", "traced_work", {"label": "im"})])
        assert [r.ok for r in mapped] == [True]
    assert results[0].ok and results[1].ok and results[2][0].ok
    calls = _calls(spans)
    for call_id, parent in (("a", "task a"), ("b", "task b"), ("r", "task arun"), ("s", "submitter"),
                            ("st", "streamer"), ("im", "imapper")):
        assert _under(calls[call_id], _named(spans, parent)), call_id
        _check_tool_spans(spans, calls[call_id], call_id)
    assert _named(spans, "task a").context.trace_id != _named(spans, "task b").context.trace_id


def test_a_timed_out_call_gets_its_span_from_the_host(spans: InMemorySpanExporter) -> None:
    with Executor(TOOLS, mode="fork", workers=1) as ex, tracer.start_as_current_span("batch"):
        result = ex.run([ToolCall("t", "hang", {"seconds": 30}, timeout=0.5)])[0]
    assert result.status == "timeout"
    call = _calls(spans)["t"]
    assert _under(call, _named(spans, "batch"))
    assert call.status.status_code == StatusCode.ERROR and "timeout" in (call.status.description or "")
    assert call.attributes["toolfork.call.status"] == "timeout"
    assert call.attributes["toolfork.worker.signal"] == "SIGTERM"
    assert call.attributes["error.type"] == "TimeoutError"
    assert call.attributes["toolfork.worker.pid"] == result.worker_pid


def test_a_crashed_call_gets_its_span_with_the_signal(spans: InMemorySpanExporter) -> None:
    with Executor(TOOLS, mode="fork", workers=1) as ex, tracer.start_as_current_span("batch"):
        died, after = ex.run([ToolCall("d", "die", {}), ToolCall("n", "traced_work", {"label": "n"})])
    assert died.status == "crashed" and after.ok
    calls = _calls(spans)
    assert calls["d"].status.status_code == StatusCode.ERROR
    assert calls["d"].attributes["toolfork.call.status"] == "crashed"
    assert calls["d"].attributes["toolfork.worker.signal"] == "SIGKILL"
    _check_tool_spans(spans, calls["n"], "n")  # the replacement worker traces as the first did


def test_sequential_mode_makes_the_same_tree(spans: InMemorySpanExporter) -> None:
    with Executor(TOOLS, mode="sequential") as ex, tracer.start_as_current_span("batch"):
        assert ex.run([ToolCall("q", "traced_work", {"label": "q"})])[0].ok
    call = _calls(spans)["q"]
    assert _under(call, _named(spans, "batch"))
    _check_tool_spans(spans, call, "q")
    assert call.attributes["toolfork.worker.pid"] == os.getpid()


def test_a_sandboxed_calls_spans_cross_the_data_only_wire(simple_spans: InMemorySpanExporter) -> None:
    spans = simple_spans
    paths = sorted({sys.prefix, sys.base_prefix, str(ROOT)} | {os.path.dirname(trace.__file__)})
    offline = Tool("traced_offline", fn=traced_body, description="traced, sandboxed",
                   limits=Limits(network=False, read_paths=paths))
    with Executor([offline], mode="fork", workers=1) as ex, tracer.start_as_current_span("batch"):
        result = ex.run([ToolCall("x", "traced_offline", {"label": "x"})])[0]
    assert _threads(result) == 1
    call = _calls(spans)["x"]
    assert _under(call, _named(spans, "batch"))
    _check_tool_spans(spans, call, "x", own_pid_space=True)


def test_spans_that_are_not_spans_are_refused() -> None:
    from toolfork.executor.tracing import spandata

    good = {"name": "n", "trace_id": "1" * 32, "span_id": "2" * 16, "flags": 1, "parent_id": None, "start": 1,
            "end": 2, "kind": 0, "status": 0, "status_description": None, "attributes": {"a": [1, 2]},
            "events": [["e", 1, {}]], "scope": "s", "scope_version": None}
    assert spandata.decode(good, None) is not None
    for bad in ({**good, "trace_id": "0" * 32}, {**good, "trace_id": "zz"}, {**good, "start": "1"},
                {**good, "kind": 9}, {**good, "attributes": {"a": {"nested": 1}}}, {**good, "attributes": {1: 2}},
                {**good, "events": [["e", "t", {}]]}, {**good, "parent_id": "x"}, {**good, "flags": 999},
                [good], "span", None):
        assert spandata.decode(bad, None) is None, bad


def test_tracing_off_costs_a_lookup_and_sends_no_trace() -> None:
    """Without the SDK imported nothing traces, and the SDK is never imported by the executor."""
    code = (
        "import sys\n"
        "from toolfork.executor import Executor, ToolCall\n"
        "from toolfork.executor.tracing import host\n"
        "from tests.observability.tools_traced import show_meta\n"
        "with Executor([show_meta], mode='fork', workers=1) as ex:\n"
        "    assert ex.run([ToolCall('a', 'show_meta', {})])[0].ok\n"
        "assert host.capture() is None\n"
        "assert 'opentelemetry.sdk.trace' not in sys.modules\n"
        "print('untraced')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "untraced", done.stderr


def test_a_traceparent_in_meta_is_the_calls_parent(spans: InMemorySpanExporter) -> None:
    """An explicit W3C traceparent (a batch file's line, the agent's run span) wins over the current span;
    one that is not valid is ignored and the current span stays the parent."""
    elsewhere = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    with Executor(TOOLS, mode="fork", workers=1) as ex, tracer.start_as_current_span("current"):
        assert all(r.ok for r in ex.run([
            ToolCall("x", "traced_work", {"label": "x"}, meta={"traceparent": elsewhere}),
            ToolCall("bad", "show_meta", {}, meta={"traceparent": "00-not-a-traceparent"})]))
    calls = _calls(spans)
    assert calls["x"].context.trace_id == int("ab" * 16, 16) and calls["x"].parent.span_id == int("cd" * 8, 16)
    _check_tool_spans(spans, calls["x"], "x")
    assert _under(calls["bad"], _named(spans, "current"))


def test_a_tracestate_in_meta_goes_with_its_traceparent(spans: InMemorySpanExporter) -> None:
    """The vendors' ``tracestate`` beside a ``traceparent`` (as a client's MCP request or a batch line
    carries it) is the call's span's trace state."""
    parent = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    with Executor(TOOLS, mode="fork", workers=1) as ex:
        meta = {"traceparent": parent, "tracestate": "vendor=1,b=2"}
        assert ex.run([ToolCall("x", "show_meta", {}, meta=meta)])[0].ok
    state = _calls(spans)["x"].context.trace_state
    assert (state.get("vendor"), state.get("b")) == ("1", "2")
