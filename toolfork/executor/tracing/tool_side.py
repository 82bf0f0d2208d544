"""The side where tools run: the call's span made current, and the tool's finished spans kept in a list.

In a forked worker the global ``TracerProvider`` is a copy of the host's, whose batch processors would
export from a thread of their own (the SDK restarts it in every child). ``install`` runs once per
process, on its first traced call: it stops those threads (``governance.hook_threads.stop``) and puts a
``Collector`` in place of the provider's span processors (in place, so tracers a library took before
the fork collect too), or makes a provider with one when the worker has none. A ``Collector`` only
appends finished spans to a list: no thread, no export. ``run_traced`` attaches the call's span
(``CallItem.trace``) as the current parent, runs the call, and returns its spans as plain data
(``spandata``), which the worker sends to the host in a SPANS frame before the result.

In the host (sequential and inline calls) there is nothing to ship: ``run_traced`` with
``collect=False`` only attaches the parent, and the tool's spans go to the host's processors directly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from toolfork.executor.wire.callitem import TraceParent

R = TypeVar("R")
_installed: list[Any] = [None, None]  # [the Collector, the pid it was installed in]


class Collector:
    """A span processor that keeps finished spans in memory until ``take``: nothing else, no thread."""

    def __init__(self) -> None:
        self._spans: list[Any] = []
        self._lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: Any) -> None:
        with self._lock:
            self._spans.append(span)

    def take(self) -> list[Any]:
        with self._lock:
            spans, self._spans = self._spans, []
        return spans

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # SDK >= 1.3x calls these on processors of its multi-processor; a no-op here.
    def _on_ending(self, span: Any) -> None:
        pass


def install() -> Collector:
    """The process's Collector, installed on first use (see the module docstring)."""
    collector, pid = _installed
    if collector is not None and pid == os.getpid():
        return collector  # type: ignore[no-any-return]
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from toolfork.governance import hook_threads

    hook_threads.stop()  # the exporter threads the SDK's at-fork hooks restarted here
    collector = Collector()
    current = trace.get_tracer_provider()
    active = getattr(current, "_active_span_processor", None)
    if isinstance(current, TracerProvider) and hasattr(active, "_span_processors"):
        with active._lock:  # type: ignore[union-attr]
            active._span_processors = (collector,)  # type: ignore[union-attr]
    else:
        fresh = TracerProvider()
        fresh.add_span_processor(collector)  # type: ignore[arg-type]
        trace.set_tracer_provider(fresh)
    _installed[:] = [collector, os.getpid()]
    return collector


def parent_context(parent: TraceParent) -> Any:
    api = _API or _api()
    trace_id, span_id, flags = parent
    trace_flags = api.flags.get(flags) or api.trace.TraceFlags(flags)
    return api.trace.set_span_in_context(api.trace.NonRecordingSpan(api.trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace_flags)))


def run_traced(parent: TraceParent, run: Callable[[], R], *, collect: bool = True) -> tuple[R, list[Any]]:
    """``run()`` with the call's span as the current parent; its result and, with ``collect``, the
    spans finished meanwhile as plain data."""
    api = _API or _api()
    collector = install() if collect else None
    if collector is not None and collector._spans:
        collector.take()  # spans finished outside any traced call are not this call's
    token = api.context.attach(parent_context(parent))
    try:
        result = run()
    finally:
        api.context.detach(token)
    if collector is None or not collector._spans:  # a list's truth is read whole: no lock needed to look
        return result, []
    from toolfork.executor.tracing import spandata

    return result, [spandata.encode(span) for span in collector.take()]


class _Api:
    """The OpenTelemetry API modules a traced call uses, imported once (an import statement in the
    function would cost every call a look-up in the import machinery)."""

    def __init__(self) -> None:
        from opentelemetry import context, trace

        self.context = context
        self.trace = trace
        self.flags = {int(f): trace.TraceFlags(f) for f in (0, 1)}  # sampled or not: the two a span has


def _api() -> _Api:
    global _API
    _API = _Api()
    return _API


_API: _Api | None = None


__all__ = ["Collector", "install", "parent_context", "run_traced"]
