"""OpenTelemetry metrics through the global MeterProvider, read with the real SDK's InMemoryMetricReader:
the calls counter, the duration and wait histograms, the worker gauges and the restarts counter; and
nothing at all when no MeterProvider is configured."""

from __future__ import annotations

import contextlib
import inspect
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics
from opentelemetry.metrics import _internal as metrics_globals
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.util._once import Once

from tests.observability.metrics_tools import TOOLS
from tests.observability.test_metrics_stats import call, eventually
from toolfork.executor import Executor, ToolCall, metering

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def global_reader() -> Iterator[InMemoryMetricReader]:
    """A global MeterProvider of the SDK for this block alone (the API lets a process set one once: the
    API's globals are put back afterwards, so later tests see none configured)."""
    saved = (metrics_globals._METER_PROVIDER_SET_ONCE, metrics_globals._METER_PROVIDER)
    metrics_globals._METER_PROVIDER_SET_ONCE = Once()
    metrics_globals._METER_PROVIDER = None
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics.set_meter_provider(provider)
    try:
        yield reader
    finally:
        provider.shutdown()
        metrics_globals._METER_PROVIDER_SET_ONCE, metrics_globals._METER_PROVIDER = saved


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    with global_reader() as reader:
        assert metering.recorder() is not None  # the instruments are made now (else: by the next Executor built)
        yield reader


def points(reader: InMemoryMetricReader) -> dict[str, dict[tuple[tuple[str, Any], ...], Any]]:
    """Metric name -> sorted attribute items -> the data point (of the toolfork meter)."""
    out: dict[str, dict[tuple[tuple[str, Any], ...], Any]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data is not None else []:
        for sm in rm.scope_metrics:
            if sm.scope.name != metering.METER_NAME:
                continue
            for m in sm.metrics:
                out[m.name] = {tuple(sorted(p.attributes.items())): p for p in m.data.data_points}
    return out


def values(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], float]:
    return {k: p.value for k, p in points(reader).get(name, {}).items()}


def delta(after: dict[Any, float], before: dict[Any, float]) -> dict[Any, float]:
    """What a counter gained (it counts every Executor of the process, earlier tests' included)."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _sdk_takes_bucket_advice() -> bool:
    from opentelemetry.sdk.metrics._internal import Meter

    return "explicit_bucket_boundaries_advisory" in inspect.signature(Meter.create_histogram).parameters


def calls_key(tool: str, status: str) -> tuple[tuple[str, Any], ...]:
    return ((metering.TOOL, tool), (metering.STATUS, status))


def test_calls_counter_and_histograms_by_tool_and_status(reader: InMemoryMetricReader) -> None:
    before = values(reader, metering.CALLS)
    restarts_before = values(reader, metering.RESTARTS)
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        results = ex.run([call(1, "add", a=1, b=2), call(2, "add", a=2, b=2), call(3, "fail"), call(4, "die"),
                          ToolCall(id="c5", name="hang", arguments={}, timeout=0.3)])
        assert [r.status for r in results] == ["ok", "ok", "error", "crashed", "timeout"]
        got = points(reader)
    assert delta(values(reader, metering.CALLS), before) == {
        calls_key("add", "ok"): 2, calls_key("fail", "error"): 1, calls_key("die", "crashed"): 1,
        calls_key("hang", "timeout"): 1}
    durations = got[metering.CALL_DURATION]
    assert {k: p.count for k, p in durations.items()} == {
        calls_key("add", "ok"): 2, calls_key("fail", "error"): 1, calls_key("die", "crashed"): 1,
        calls_key("hang", "timeout"): 1}
    assert durations[calls_key("hang", "timeout")].sum >= 0.3  # it ran until its deadline
    if _sdk_takes_bucket_advice():  # else the SDK's own buckets (a View sets them: see --metrics-port)
        assert tuple(durations[calls_key("add", "ok")].explicit_bounds) == metering.SECONDS_BUCKETS
    waits = got[metering.CALL_WAIT]
    assert {k: p.count for k, p in waits.items()} == {
        ((metering.TOOL, "add"),): 2, ((metering.TOOL, "fail"),): 1, ((metering.TOOL, "die"),): 1,
        ((metering.TOOL, "hang"),): 1}
    assert delta(values(reader, metering.RESTARTS), restarts_before) == {
        ((metering.CAUSE, "crash"),): 1, ((metering.CAUSE, "timeout"),): 1}


def test_worker_gauges_follow_a_running_batch(reader: InMemoryMetricReader, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    busy, idle = ((metering.STATE, "busy"),), ((metering.STATE, "idle"),)
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        assert values(reader, metering.WORKERS) == {busy: 0, idle: 2}
        t = threading.Thread(target=ex.run, args=([call(i, "hold", gate=str(gate)) for i in range(3)],))
        t.start()
        try:
            eventually(lambda: values(reader, metering.WORKERS) == {busy: 2, idle: 0})
            assert values(reader, metering.QUEUED) == {(): 1}
        finally:
            gate.touch()
            t.join(60)
        eventually(lambda: values(reader, metering.WORKERS) == {busy: 0, idle: 2})
    assert values(reader, metering.WORKERS) == {busy: 0, idle: 0}  # closed: it has no workers any more


def test_counters_never_go_down_when_an_executor_closes(reader: InMemoryMetricReader) -> None:
    ex = Executor(TOOLS, mode="sequential")
    ex.run([call(i, "add", a=i, b=i) for i in range(3)])
    open_ = values(reader, metering.CALLS)
    ex.close()
    assert values(reader, metering.CALLS) == open_
    with Executor(TOOLS, mode="sequential") as other:
        other.run([call(9, "add", a=1, b=1)])
        assert delta(values(reader, metering.CALLS), open_) == {calls_key("add", "ok"): 1}


def test_collecting_while_calls_crash_never_fails_and_never_goes_down(reader: InMemoryMetricReader) -> None:
    before = values(reader, metering.CALLS)
    stop = threading.Event()
    totals: list[float] = []
    errors: list[BaseException] = []

    def scrape() -> None:
        try:
            while not stop.is_set():
                totals.append(sum(values(reader, metering.CALLS).values()))
        except BaseException as exc:
            errors.append(exc)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        with Executor(TOOLS, mode="fork", workers=2) as ex:
            ex.run([call(i, "die" if i % 10 == 0 else "add", **({} if i % 10 == 0 else {"a": i, "b": 1}))
                    for i in range(100)])
    finally:
        stop.set()
        scraper.join(30)
    assert not errors
    assert totals and totals == sorted(totals)
    assert delta(values(reader, metering.CALLS), before) == {calls_key("add", "ok"): 90,
                                                             calls_key("die", "crashed"): 10}


def test_no_meter_provider_means_no_recording_and_no_import() -> None:
    script = textwrap.dedent("""
        import sys
        from tests.observability.metrics_tools import TOOLS
        from toolfork.executor import Executor, metering
        with Executor(TOOLS, mode="fork", workers=1) as ex:
            assert [r.status for r in ex.run([{"id": "a", "name": "add", "arguments": {"a": 1, "b": 2}}])] == ["ok"]
            assert ex.stats().calls_total == 1
        assert "opentelemetry" not in sys.modules, "opentelemetry was imported"
        import opentelemetry.metrics  # the API alone: still no provider configured
        assert metering.recorder() is None
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_provider_set_after_the_executor_is_seen_by_the_next_batch() -> None:
    with Executor(TOOLS, mode="sequential") as ex:
        ex.run([call(1, "add", a=1, b=1)])  # no provider yet: nothing recorded
        with global_reader() as reader:
            ex.run([call(2, "add", a=1, b=1)])
            got = points(reader)
    assert {k: p.count for k, p in got[metering.CALL_DURATION].items()} == {calls_key("add", "ok"): 1}
    assert got[metering.CALLS][calls_key("add", "ok")].value >= 2  # the counter has both: it reads stats()
