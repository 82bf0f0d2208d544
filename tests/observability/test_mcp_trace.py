"""``toolfork mcp serve`` with its OpenTelemetry set up from the standard ``OTEL_*`` variables, exporting
over OTLP/HTTP to a receiver the test runs, driven by the MCP SDK's own client: a ``tools/call`` whose
``_meta`` carries a W3C ``traceparent`` (and ``tracestate``) puts its ``execute_tool`` span, and the
spans the tool starts in its worker, in the client's trace: client span > the MCP SDK's server span of
the request > ``execute_tool`` > the tool's spans; one without starts a trace of its own; on SIGTERM
the spans and metrics still held reach the exporter before the server exits."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from tests.mcp.conftest import ROOT, http_server, python_env
from tests.observability.otlp_receiver import Receiver, Span, otlp_receiver

pytestmark = pytest.mark.xdist_group("mcp_trace")

SERVE = [sys.executable, "-m", "toolfork", "mcp", "serve", "--tools", "tests/observability/tools_traced.py",
         "--workers", "1"]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"


def _env(receiver: Receiver, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in python_env().items() if not k.startswith("OTEL_")}
    return {**env, **receiver.env(), **extra}


@pytest.fixture(autouse=True)
def client_without_an_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client here is one without the OpenTelemetry SDK, which sends the ``_meta`` it is given. This
    test process may hold an SDK TracerProvider another test set (the API allows one per process); the MCP
    SDK's client would then open a span of its own per request and send that span's context instead."""
    from mcp.shared import _otel
    from opentelemetry import trace

    monkeypatch.setattr(_otel, "_tracer", trace.NoOpTracer())


async def _calls(server: Any, results: list[Any], then: Callable[[], None] = lambda: None) -> None:
    from mcp import Client

    async with Client(server) as client:
        results.append(await client.call_tool("traced_work", {"label": "joined"},
                                              meta={"traceparent": TRACEPARENT, "tracestate": "vendor=1"}))  # type: ignore[typeddict-unknown-key]
        results.append(await client.call_tool("traced_work", {"label": "alone"}))
        then()


def _sigterm_stdio_server() -> None:
    """SIGTERM the stdio server the client started (a child of this process) and wait for its end."""
    server = next(p for p in psutil.Process().children() if "mcp" in p.cmdline() and "serve" in p.cmdline())
    server.send_signal(signal.SIGTERM)
    assert server.wait(30) == 0


def _by_name(spans: list[Span]) -> dict[str, Span]:
    return {s.name: s for s in spans}


def _assert_traces(spans: list[Span]) -> None:
    tools = [s for s in spans if s.name == "execute_tool traced_work"]
    assert len(tools) == 2, [s.name for s in spans]
    joined = next(s for s in tools if s.trace_id == TRACE_ID)
    alone = next(s for s in tools if s.trace_id != TRACE_ID)
    requests = {s.span_id: s for s in spans if s.name == "tools/call traced_work"}  # the MCP SDK's server spans
    # The client's trace: under the server's span of the request, itself under the client's span.
    request = requests[joined.parent_id]
    assert (request.trace_id, request.parent_id, request.trace_state) == (TRACE_ID, CLIENT_SPAN, "vendor=1")
    assert joined.trace_state == "vendor=1" and joined.attributes["gen_ai.tool.name"] == "traced_work"
    assert joined.attributes["toolfork.call.status"] == "ok" and joined.service == "toolfork-under-test"
    # The tool's own spans, made in its worker, under the call's span, in the same trace.
    named = _by_name(spans)
    outer, inner = named["outer joined"], named["inner joined"]
    assert (outer.trace_id, outer.parent_id) == (TRACE_ID, joined.span_id)
    assert (inner.trace_id, inner.parent_id) == (TRACE_ID, outer.span_id)
    assert outer.attributes["tool.pid"] == joined.attributes["toolfork.worker.pid"] != os.getpid()
    # A request without a trace context: a trace of its own, from its request's span down.
    assert requests[alone.parent_id].parent_id == "" and alone.trace_id != TRACE_ID
    assert named["outer alone"].parent_id == alone.span_id


def test_stdio_call_continues_the_clients_trace_and_sigterm_flushes_it() -> None:
    from mcp import StdioServerParameters

    with otlp_receiver() as receiver:
        # A batch delay far past the test: the spans reach the receiver only because the exit flushes them.
        server = StdioServerParameters(command=SERVE[0], args=SERVE[1:], cwd=str(ROOT),
                                       env=_env(receiver, OTEL_BSP_SCHEDULE_DELAY="600000"))
        results: list[Any] = []
        before: list[Span] = []

        def stop() -> None:
            before.extend(receiver.spans())
            _sigterm_stdio_server()

        with contextlib.suppress(Exception):  # the client's session ends with the server
            asyncio.run(_calls(server, results, stop))
        assert [r.is_error for r in results] == [False, False] and before == []
        receiver.wait_for(lambda: len(receiver.spans()) >= 6)
        _assert_traces(receiver.spans())


def test_http_call_continues_the_clients_trace_and_sigterm_flushes_it() -> None:
    with otlp_receiver() as receiver:
        # A batch delay far past the test: the spans reach the receiver only because the exit flushes them.
        env = _env(receiver, OTEL_BSP_SCHEDULE_DELAY="600000", OTEL_METRIC_EXPORT_INTERVAL="600000")
        with http_server([*SERVE, "--http", "127.0.0.1:0"], env=env) as (proc, url):
            results: list[Any] = []
            asyncio.run(_calls(url, results))
            assert [r.is_error for r in results] == [False, False]
            assert receiver.spans() == []
            os.kill(proc.pid, signal.SIGTERM)
            assert proc.wait(30) == 0
        receiver.wait_for(lambda: len(receiver.spans()) >= 6)
        _assert_traces(receiver.spans())
        # The metrics the server held went out at the exit too: both calls, by tool and status.
        calls = receiver.metric_points("toolfork.calls")
        assert any(attrs == {"gen_ai.tool.name": "traced_work", "toolfork.call.status": "ok"} and point.as_int == 2
                   for attrs, point in calls), calls
