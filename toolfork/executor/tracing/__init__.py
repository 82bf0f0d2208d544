"""Tracing across the fork with the OpenTelemetry API: one ``execute_tool`` span per call, the tool's own
spans under it, wherever the call ran.

    host (submit)                         where the call runs (worker, one-shot, host)
    capture(): current context ─┐
    CallBook.admit: CallSpans.start ──────── span ── CallItem.trace ──> run_traced: parent attached,
         │                                                               the tool's spans collected
         │   <── SPANS frame (plain data: spandata) ── after the call ───┘  (no thread: a list)
    core.read: export() ──> checked, cut to the SDK's limits (a sandboxed call's rebound to it: confine)
               ──> the host provider's span processors (any exporter)
    CallBook.finish: CallSpans.finish(result): status, worker pid, wait, signal; span.end()

``host`` is the host side, ``tool_side`` the side where tools run (a worker, or the host for
sequential and inline calls), ``spandata`` the plain-data form finished spans cross in (it passes the
data-only wire of sandboxed calls), ``confine`` what the host fixes in a sandboxed call's spans.
Everything is off, at the
cost of one dictionary look-up per batch or submitted call, unless the OpenTelemetry SDK is imported
and its ``TracerProvider`` is the global one.
"""

from toolfork.executor.tracing.confine import CallWindow
from toolfork.executor.tracing.host import (
    TRACEPARENT,
    TRACESTATE,
    CallSpans,
    capture,
    dropped_spans,
    export,
    traceparent,
)
from toolfork.executor.tracing.tool_side import run_traced

__all__ = ["TRACEPARENT", "TRACESTATE", "CallSpans", "CallWindow", "capture", "dropped_spans", "export", "run_traced",
           "traceparent"]
