"""The host's side of tracing: the ``execute_tool`` span of each call, and the spans workers send back.

``capture()`` runs where a call is submitted (``run``, ``stream``, ``imap``, ``arun``, ``submit``...)
and returns the OpenTelemetry context current there, or None when nothing traces: the OpenTelemetry SDK
is not imported, or its ``TracerProvider`` is not the global provider. That check is one dictionary
look-up when the SDK is not imported, so tracing off costs nothing measurable.

``CallSpans`` belongs to one batch (its ``CallBook``). ``start`` opens a call's span when the call is
dispatched, under the captured context, or under the W3C ``traceparent`` in the call's ``meta`` when it
has one (how the agent puts its calls under its run's span, and how a batch file's lines join a trace),
and gives its ``(trace_id, span_id, flags)`` to carry in the ``CallItem``. ``finish`` records how long
the call waited for a worker or a cap (the span's length less the tool's run), the worker's pid, the
status (ERROR for anything but ok) and, for a crashed or killed call, the signal, and ends the span.
The host ends every span, so a call whose worker was killed at its deadline or died still gets its span.

``export`` takes the spans a worker shipped (plain data, see ``spandata``) and hands each to the host
provider's span processors as a ``ReadableSpan``: whatever exporter the user set up gets them. Each is
checked and cut to the SDK's span limits first (a malformed one is dropped and counted), and a
sandboxed call's are rebound to that call (``confine``).
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any

from toolfork.executor.tracing import confine
from toolfork.executor.tracing.confine import CallWindow
from toolfork.executor.types import ToolResult
from toolfork.executor.wire.callitem import TraceParent

log = logging.getLogger("toolfork.executor")

SDK_MODULE = "opentelemetry.sdk.trace"
TRACER_NAME = "toolfork.executor"
_SIGNAL = re.compile(r"\bSIG[A-Z0-9]+\b")
TRACEPARENT = "traceparent"  # the meta key a call's explicit parent goes under (W3C Trace Context)
TRACESTATE = "tracestate"  # and its vendors' trace state, carried with it when there is one
_tracers: dict[int, tuple[Any, Any]] = {}  # id(provider) -> (provider, tracer)
_propagators: dict[str, Any] = {}


def provider() -> Any:
    """The global SDK ``TracerProvider``, or None (no SDK imported, or another provider is global)."""
    sdk = sys.modules.get(SDK_MODULE)
    if sdk is None:
        return None
    from opentelemetry import trace

    current = trace.get_tracer_provider()
    return current if isinstance(current, sdk.TracerProvider) else None


def capture() -> Any:
    """The context to parent the calls submitted here under, or None when nothing traces."""
    if sys.modules.get(SDK_MODULE) is None or provider() is None:
        return None
    from opentelemetry import context

    return context.get_current()


def _tracer() -> Any:
    current = provider()
    if current is None:
        return None
    cached = _tracers.get(id(current))
    if cached is None or cached[0] is not current:
        cached = (current, current.get_tracer(TRACER_NAME))
        _tracers[id(current)] = cached
    return cached[1]


class CallSpans:
    """The open ``execute_tool`` spans of one batch, by call id."""

    __slots__ = ("_open", "_tracer")

    def __init__(self) -> None:
        self._open: dict[str, tuple[Any, int]] = {}  # call id -> (span, start in ns)
        self._tracer: Any = None

    def start(self, call_id: str, name: str, parent: Any, meta: dict[str, str] | None = None) -> TraceParent | None:
        """Open the call's span under ``parent`` (a captured context), or under the W3C ``traceparent``
        (and ``tracestate``) in the call's ``meta`` when it has a valid one; its ids for the CallItem."""
        tracer = self._tracer
        if tracer is None:
            tracer = self._tracer = _tracer()
            if tracer is None:
                return None
        if meta is not None and TRACEPARENT in meta:
            carrier = {TRACEPARENT: meta[TRACEPARENT]}
            if TRACESTATE in meta:
                carrier[TRACESTATE] = meta[TRACESTATE]
            parent = _propagator().extract(carrier, context=parent)
        now = time.time_ns()
        span = tracer.start_span(f"execute_tool {name}", context=parent, start_time=now, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id})
        earlier = self._open.get(call_id)
        if earlier is not None:  # an id reused after a cancel: the earlier call's span ends here
            _end(earlier[0], "cancelled", None, None)
        self._open[call_id] = (span, now)
        ctx = span.get_span_context()
        return (ctx.trace_id, ctx.span_id, int(ctx.trace_flags))

    def finish(self, result: ToolResult) -> None:
        opened = self._open.pop(result.call_id, None)
        if opened is not None:
            span, start = opened
            # What the call did not spend running: waiting for a worker, a cap or a rate limit (and the trip).
            _end(span, result.status, result.worker_pid, result.error,
                 max(0.0, (time.time_ns() - start) / 1e9 - result.duration_s))

    def close(self) -> None:
        """The batch ended with calls still open (its consumer left): they end "cancelled"."""
        for span, _ in self._open.values():
            _end(span, "cancelled", None, None)
        self._open.clear()


def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    cached = _propagators.get("w3c")
    if cached is None:
        cached = _propagators["w3c"] = TraceContextTextMapPropagator()
    return cached


def traceparent(span: Any) -> str:
    """The W3C ``traceparent`` of ``span`` (to put in a call's ``meta``: its span goes under ``span``)."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _end(span: Any, status: str, pid: int | None, error: Any, wait: float | None = None) -> None:
    attributes: dict[str, Any] = {"toolfork.call.status": status}  # one set_attributes: one lock round
    if wait is not None:
        attributes["toolfork.call.wait_s"] = wait
    if pid is not None:
        attributes["toolfork.worker.pid"] = pid
    if status != "ok":
        from opentelemetry.trace import StatusCode

        message = str(error) if error is not None else status
        if error is not None:
            attributes["error.type"] = error.type
        if status in ("crashed", "timeout"):
            signal = _SIGNAL.search(message)
            if signal is not None:
                attributes["toolfork.worker.signal"] = signal.group(0)
        span.set_status(StatusCode.ERROR, f"{status}: {message}")
    span.set_attributes(attributes)
    span.end()


def export(spans: Any, call: CallWindow | None = None) -> None:
    """Hand the spans a worker shipped to the host provider's span processors, each checked and cut to
    the SDK's span limits; one that is not the shape of a span is dropped and counted
    (``dropped_spans``), never exported. With ``call`` (a sandboxed call's: see ``confine``) they are
    rebound to that call first."""
    from toolfork.executor.tracing import spandata

    current = provider()
    processor = getattr(current, "_active_span_processor", None)
    if processor is None or type(spans) is not list:
        return
    checked = []
    for data in spans:
        span = spandata.check(data)
        if span is not None:
            checked.append(span)
    if call is not None:
        checked = confine.bind(checked, call)
    dropped = len(spans) - len(checked)
    if dropped:
        _dropped[0] += dropped
        log.warning("a worker sent %d span(s) that could not be exported (not the shape of a span, or from a "
                    "sandboxed call that is not traced); dropped", dropped)
    if not checked:
        return
    resource = current.resource
    limits = getattr(current, "_span_limits", None) or spandata.default_limits()
    for span in checked:
        processor.on_end(spandata.build(span, resource, limits))


_dropped = [0]  # spans dropped by ``export`` in this process (the driver's thread adds; anyone reads)


def dropped_spans() -> int:
    """How many spans workers sent that were dropped instead of exported, in this process so far."""
    return _dropped[0]


__all__ = ["TRACEPARENT", "TRACESTATE", "CallSpans", "CallWindow", "capture", "dropped_spans", "export", "provider",
           "traceparent"]
