"""OpenTelemetry metrics of every Executor of this process, through the global MeterProvider.

The SDK and its exporters stay the user's choice (as in every instrumented library): with no
MeterProvider configured, or no ``opentelemetry`` imported at all, nothing here runs on a call's path.

    Executor.stats() of every live Executor ─┐  read at collection time only (observable instruments):
    totals of the Executors closed before    ─┴─> toolfork.calls, toolfork.workers, toolfork.calls.queued,
                                                  toolfork.worker.restarts, toolfork.template.restarts
    spans dropped by tracing.export            ───> toolfork.spans.dropped
    each call's result, in its batch's loop  ───> toolfork.call.duration, toolfork.call.wait_time
                                                  (histograms: recorded per call, only while a provider is set)

Counts come from ``Executor.stats()`` (already counted for it), so the counters cost a call nothing;
only the two histograms are recorded per call, by a ``Recorder`` a batch takes when it starts (a
MeterProvider configured later is seen by the batches started after it). The counters are process-wide
sums: an Executor's counts stay in them after it is closed, so they never go down.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Protocol

from toolfork.executor.stats import RESTART_CAUSES, ExecutorStats

if TYPE_CHECKING:
    from toolfork.executor.types import ToolResult

METER_NAME = "toolfork"

# Instrument names (OpenTelemetry semantic-convention style; a Prometheus exporter writes them as
# toolfork_calls_total, toolfork_call_duration_seconds, toolfork_workers, ...).
CALLS = "toolfork.calls"  # counter, {call}: finished calls, by tool and status
CALL_DURATION = "toolfork.call.duration"  # histogram, s: how long the tool ran, by tool and status
CALL_WAIT = "toolfork.call.wait_time"  # histogram, s: pulled from its batch until started, by tool
WORKERS = "toolfork.workers"  # gauge, {worker}: by state (busy | idle)
QUEUED = "toolfork.calls.queued"  # gauge, {call}: pulled and not yet sent (waiting for a worker or a cap)
RESTARTS = "toolfork.worker.restarts"  # counter, {worker}: workers ended early, by cause
TEMPLATE_RESTARTS = "toolfork.template.restarts"  # counter, {template}: fork templates replaced
SPANS_DROPPED = "toolfork.spans.dropped"  # counter, {span}: spans from workers dropped, not exported

# Histogram bucket bounds, in seconds: from a trivial call in a warm worker to a five-minute one.
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                   60.0, 300.0)

# Attribute keys.
TOOL = "gen_ai.tool.name"
STATUS = "toolfork.call.status"
STATE = "toolfork.worker.state"
CAUSE = "toolfork.restart.cause"


class Measured(Protocol):
    """What is measured of an Executor (``Executor.stats``)."""

    def stats(self) -> ExecutorStats: ...


_lock = threading.Lock()  # guards the registry below and the instruments' creation (never a call's path)
_tracked: weakref.WeakSet[Any] = weakref.WeakSet()
_retired_calls: dict[tuple[str, str], int] = {}
_retired_restarts: dict[str, int] = {}
_retired_templates = 0
_instruments: tuple[Any, Recorder] | None = None  # (the provider, its instruments)


def track(executor: Measured) -> None:
    """A new Executor: its stats join the process's metrics (and the instruments are made if a
    MeterProvider is configured)."""
    with _lock:
        _tracked.add(executor)
    recorder()


def retire(executor: Measured) -> None:
    """A closed Executor: its final counts stay in the counters; it is no longer asked."""
    global _retired_templates
    with _lock:
        if executor not in _tracked:
            return
        final = executor.stats()
        _tracked.discard(executor)
        _add(_retired_calls, final.calls)
        _add(_retired_restarts, final.restarts)
        _retired_templates += final.template_restarts


def recorder() -> Recorder | None:
    """The histograms to record a batch's calls in, or None when no MeterProvider is configured
    (then nothing is recorded, and ``opentelemetry`` is not even imported)."""
    if "opentelemetry.metrics" not in sys.modules:  # nobody configured a provider: it is not imported
        return None
    from opentelemetry import metrics

    provider = metrics.get_meter_provider()
    if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):  # none configured
        return None
    global _instruments
    made = _instruments
    if made is not None and made[0] is provider:
        return made[1]
    with _lock:
        if _instruments is None or _instruments[0] is not provider:
            _instruments = (provider, Recorder(provider))
        return _instruments[1]


class Recorder:
    """The toolfork instruments of one MeterProvider."""

    def __init__(self, provider: Any) -> None:
        meter = provider.get_meter(METER_NAME)
        self.duration = _histogram(meter, CALL_DURATION, "How long a tool call ran, by tool and status")
        self.wait = _histogram(meter, CALL_WAIT, "How long a call waited for a worker, a cap or a rate limit")
        counter, gauge = meter.create_observable_counter, meter.create_observable_gauge
        for create, name, observe, unit, description in (
            (counter, CALLS, _observe_calls, "{call}", "Tool calls finished, by tool and status"),
            (gauge, WORKERS, _observe_workers, "{worker}", "Workers, by state (busy: running a call; idle)"),
            (gauge, QUEUED, _observe_queued, "{call}", "Calls pulled and not yet sent (waiting for a worker or a cap)"),
            (counter, RESTARTS, _observe_restarts, "{worker}", "Workers ended early and replaced, by cause"),
            (counter, TEMPLATE_RESTARTS, _observe_templates, "{template}", "Fork template processes replaced"),
            (counter, SPANS_DROPPED, _observe_dropped_spans, "{span}",
             "Spans workers sent that were malformed, dropped, not exported"),
        ):
            create(name, [observe], unit=unit, description=description)
        self._finished: dict[tuple[str, str], dict[str, str]] = {}  # attributes, made once per (tool, status)
        self._tools: dict[str, dict[str, str]] = {}

    def started(self, name: str, pulled_at: float | None) -> None:
        if pulled_at is not None:
            attrs = self._tools.get(name)
            if attrs is None:
                attrs = self._tools[name] = {TOOL: name}
            self.wait.record(max(0.0, time.monotonic() - pulled_at), attrs)

    def finished(self, tool: str, result: ToolResult) -> None:
        key = (tool, result.status)
        attrs = self._finished.get(key)
        if attrs is None:
            attrs = self._finished[key] = {TOOL: tool, STATUS: result.status}
        self.duration.record(result.duration_s, attrs)


def _histogram(meter: Any, name: str, description: str) -> Any:
    """A histogram of seconds with buckets for tool calls (the SDK's default ones are for milliseconds);
    an API older than bucket advice (before 1.23) gets the SDK's."""
    try:
        return meter.create_histogram(name, unit="s", description=description,
                                      explicit_bucket_boundaries_advisory=SECONDS_BUCKETS)
    except TypeError:
        return meter.create_histogram(name, unit="s", description=description)


def _add(into: dict[Any, int], counts: Any) -> None:
    for key, n in counts.items():
        into[key] = into.get(key, 0) + n


def _live() -> list[ExecutorStats]:
    out = []
    for ex in list(_tracked):
        try:
            out.append(ex.stats())
        except Exception:  # an Executor half-built or torn down: it has nothing to say
            continue
    return out


def _observe_calls(_options: Any) -> list[Any]:
    from opentelemetry.metrics import Observation

    with _lock:
        totals = dict(_retired_calls)
        for s in _live():
            _add(totals, s.calls)
    return [Observation(n, {TOOL: tool, STATUS: status}) for (tool, status), n in sorted(totals.items())]


def _observe_workers(_options: Any) -> list[Any]:
    from opentelemetry.metrics import Observation

    with _lock:
        live = _live()
    return [Observation(sum(s.busy for s in live), {STATE: "busy"}),
            Observation(sum(s.idle for s in live), {STATE: "idle"})]


def _observe_queued(_options: Any) -> list[Any]:
    from opentelemetry.metrics import Observation

    with _lock:
        live = _live()
    return [Observation(sum(s.queued for s in live))]


def _observe_restarts(_options: Any) -> list[Any]:
    from opentelemetry.metrics import Observation

    with _lock:
        totals = dict.fromkeys(RESTART_CAUSES, 0)  # every cause, from 0: a rate() has a start
        _add(totals, _retired_restarts)
        for s in _live():
            _add(totals, s.restarts)
    return [Observation(n, {CAUSE: cause}) for cause, n in sorted(totals.items())]


def _observe_templates(_options: Any) -> list[Any]:
    from opentelemetry.metrics import Observation

    with _lock:
        total = _retired_templates + sum(s.template_restarts for s in _live())
    return [Observation(total)]


def _observe_dropped_spans(_options: Any) -> list[Any]:
    from opentelemetry.metrics import Observation

    from toolfork.executor.tracing.host import dropped_spans

    return [Observation(dropped_spans())]


__all__ = ["CALLS", "CALL_DURATION", "CALL_WAIT", "QUEUED", "RESTARTS", "SPANS_DROPPED", "TEMPLATE_RESTARTS", "WORKERS",
           "Recorder", "recorder", "retire", "track"]
