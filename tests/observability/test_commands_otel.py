"""``toolfork run`` and ``toolfork worker`` set OpenTelemetry up from the standard ``OTEL_*`` variables
(exporting over OTLP/HTTP to a receiver the test runs): every call's ``execute_tool`` span, the tool's own
spans under it and the calls' metrics reach the exporter, on the line lane's jobs too, also when the job
is stopped by SIGTERM; without the variables the SDK is not even imported and the lane runs as before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.mcp.conftest import ROOT
from tests.observability.otlp_receiver import Receiver, otlp_receiver

TOOLS = ["--tools", "tests/observability/tools_traced.py:LANE_TOOLS"]
PARENT_TRACE, PARENT_SPAN = "ab" * 16, "cd" * 8
# Batches and metric exports far past the test: what reaches the receiver, the exit flushed.
HELD = {"OTEL_BSP_SCHEDULE_DELAY": "600000", "OTEL_METRIC_EXPORT_INTERVAL": "600000"}


def _env(receiver: Receiver | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLFORK_"))}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **(receiver.env() if receiver is not None else {}), **extra}


def _lines(calls: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(c) + "\n" for c in calls)


CALLS = [{"id": f"c{i}", "name": "traced_work", "arguments": {"label": f"c{i}"}} for i in range(3)] + [
    {"id": "joined", "name": "traced_work", "arguments": {"label": "joined"},
     "meta": {"traceparent": f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"}},
    {"id": "sdk", "name": "sdk_imported", "arguments": {}}]


def _check(receiver: Receiver, records: dict[str, Any]) -> None:
    assert {r["status"] for r in records.values()} == {"ok"}, records
    assert records["sdk"]["output"]["content"][0]["text"] == "true"
    receiver.wait_for(lambda: len([s for s in receiver.spans() if s.name.startswith("execute_tool")]) == 5)
    spans = receiver.spans()
    calls = {s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool")}
    assert sorted(calls) == sorted(records)
    for label in ("c0", "c1", "c2", "joined"):
        call = calls[label]
        outer = next(s for s in spans if s.name == f"outer {label}")
        inner = next(s for s in spans if s.name == f"inner {label}")
        assert (outer.trace_id, outer.parent_id) == (call.trace_id, call.span_id)
        assert (inner.trace_id, inner.parent_id) == (call.trace_id, outer.span_id)
        assert call.attributes["toolfork.worker.pid"] == outer.attributes["tool.pid"]
        assert call.service == "toolfork-under-test"
    assert (calls["joined"].trace_id, calls["joined"].parent_id) == (PARENT_TRACE, PARENT_SPAN)
    counted = {attrs["gen_ai.tool.name"]: point.as_int for attrs, point in receiver.metric_points("toolfork.calls")
               if attrs.get("toolfork.call.status") == "ok"}
    assert counted == {"traced_work": 4, "sdk_imported": 1}, counted
    durations = [p for attrs, p in receiver.metric_points("toolfork.call.duration")
                 if attrs.get("gen_ai.tool.name") == "traced_work"]
    assert durations and durations[-1].count == 4


def test_toolfork_run_exports_its_calls_spans_and_metrics(tmp_path: Path) -> None:
    calls, out = tmp_path / "calls.jsonl", tmp_path / "out.jsonl"
    calls.write_text(_lines(CALLS))
    with otlp_receiver() as receiver:
        done = subprocess.run([sys.executable, "-m", "toolfork", "run", str(calls), "-o", str(out), "-q", "--mode",
                               "fork", "--workers", "2", *TOOLS], cwd=ROOT, env=_env(receiver, **HELD),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        _check(receiver, {r["id"]: r for r in map(json.loads, out.read_text().splitlines())})


def test_toolfork_worker_exports_its_calls_spans_and_metrics() -> None:
    with otlp_receiver() as receiver:
        done = subprocess.run([sys.executable, "-m", "toolfork", "worker", "--mode", "fork", "--workers", "2", *TOOLS],
                              input=_lines(CALLS), cwd=ROOT, env=_env(receiver, **HELD), capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        _check(receiver, {r["id"]: r for r in map(json.loads, done.stdout.splitlines())})


def test_toolfork_run_stopped_by_sigterm_still_exports_what_it_did(tmp_path: Path) -> None:
    calls, out = tmp_path / "calls.jsonl", tmp_path / "out.jsonl"
    calls.write_text(_lines([*CALLS[:2], {"id": "stuck", "name": "hang", "arguments": {"seconds": 60}}]))
    with otlp_receiver() as receiver:
        proc = subprocess.Popen([sys.executable, "-m", "toolfork", "run", str(calls), "-o", str(out), "-q", "--mode",
                                 "fork", "--workers", "2", *TOOLS], cwd=ROOT, env=_env(receiver, **HELD),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not (out.exists() and len(out.read_text().splitlines()) == 2):
                assert time.monotonic() < deadline and proc.poll() is None, "the two quick calls never finished"
                time.sleep(0.05)
            assert receiver.spans() == []
            proc.send_signal(signal.SIGTERM)  # the first: a warm stop, which waits for the stuck call
            deadline = time.monotonic() + 60
            while "Ctrl-C again" not in (line := proc.stderr.readline() if proc.stderr else ""):  # type: ignore[assignment]
                assert line and time.monotonic() < deadline, "the warm stop was never announced"
            proc.send_signal(signal.SIGTERM)  # the second stops at once
            assert proc.wait(60) == 128 + signal.SIGTERM
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        receiver.wait_for(lambda: len([s for s in receiver.spans() if s.name.startswith("execute_tool")]) == 3)
        status = {s.attributes["gen_ai.tool.call.id"]: s.attributes["toolfork.call.status"]
                  for s in receiver.spans() if s.name.startswith("execute_tool")}
        assert status == {"c0": "ok", "c1": "ok", "stuck": "cancelled"}


def test_without_otel_variables_nothing_is_set_up_and_the_lane_runs(tmp_path: Path) -> None:
    calls, out = tmp_path / "calls.jsonl", tmp_path / "out.jsonl"
    calls.write_text(_lines(CALLS))
    done = subprocess.run([sys.executable, "-m", "toolfork", "run", str(calls), "-o", str(out), "--log-level",
                           "debug", "--mode", "fork", "--workers", "2", *TOOLS], cwd=ROOT,
                          env=_env(None, OTEL_TRACES_EXPORTER="none"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records["sdk"]["output"]["content"][0]["text"] == "false"
    assert "the line lane" in done.stderr, done.stderr


def test_an_exporter_that_is_not_installed_is_a_warning_and_the_job_runs(tmp_path: Path) -> None:
    calls, out = tmp_path / "calls.jsonl", tmp_path / "out.jsonl"
    calls.write_text(_lines(CALLS[:1]))
    done = subprocess.run([sys.executable, "-m", "toolfork", "run", str(calls), "-o", str(out), "-q", "--mode",
                           "fork", "--workers", "1", *TOOLS], cwd=ROOT, env=_env(None, OTEL_TRACES_EXPORTER="nonesuch"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "OTEL_TRACES_EXPORTER set, but OpenTelemetry could not be set up" in done.stderr
    assert "nonesuch" in done.stderr and json.loads(out.read_text())["status"] == "ok"


def test_workers_run_no_metric_reader_thread_of_the_hosts() -> None:
    """The host's periodic metric reader (OTEL_METRICS_EXPORTER) is restarted by the SDK in every forked
    child; in a worker it would export the child's stale copy of the host's metrics from a thread of its
    own. The worker runs its calls with its main thread alone."""
    calls = [{"id": f"t{i}", "name": "traced_work", "arguments": {"label": f"t{i}"}} for i in range(4)]
    with otlp_receiver() as receiver:
        done = subprocess.run([sys.executable, "-m", "toolfork", "worker", "--mode", "fork", "--workers", "2", *TOOLS],
                              input=_lines(calls), cwd=ROOT, env=_env(receiver, OTEL_METRIC_EXPORT_INTERVAL="100"),
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = [json.loads(json.loads(line)["output"]["content"][0]["text"]) for line in done.stdout.splitlines()]
    assert len(seen) == 4 and all(s["names"] == ["MainThread"] for s in seen), seen


def test_metrics_port_keeps_its_metrics_beside_otel_traces() -> None:
    """``--metrics-port`` owns the MeterProvider; OTEL_TRACES_EXPORTER still sets tracing up, quietly."""
    with otlp_receiver() as receiver:
        env = _env(receiver, **HELD)
        del env["OTEL_METRICS_EXPORTER"]
        proc = subprocess.Popen([sys.executable, "-m", "toolfork", "worker", "--mode", "fork", "--workers", "1",
                                 "--metrics-port", "0", *TOOLS], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            said = [proc.stderr.readline()]
            while "metrics at http://" not in said[-1]:
                assert said[-1], "the worker never announced its metrics"
                said.append(proc.stderr.readline())
            announced = said[-1]
            proc.stdin.write(_lines(CALLS[:1]))
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["status"] == "ok"
            url = announced.rsplit(" ", 1)[-1].strip()
            with urllib.request.urlopen(url, timeout=10) as response:
                scraped = response.read().decode()
            assert any(line.startswith("toolfork_calls_total{") and 'gen_ai_tool_name="traced_work"' in line
                       and 'toolfork_call_status="ok"' in line and line.endswith(" 1.0")
                       for line in scraped.splitlines()), scraped
            proc.stdin.close()
            assert proc.wait(60) == 0
            rest = "".join(said) + proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        assert "Overriding" not in rest and "MeterProvider" not in rest, rest
        receiver.wait_for(lambda: any(s.name == "execute_tool traced_work" for s in receiver.spans()))
        assert receiver.metric_points("toolfork.calls") == []  # the metrics are --metrics-port's alone


def test_metrics_port_and_otel_metrics_exporter_together_are_a_usage_error() -> None:
    with otlp_receiver() as receiver:
        done = subprocess.run([sys.executable, "-m", "toolfork", "worker", "--metrics-port", "0", *TOOLS],
                              input="", cwd=ROOT, env=_env(receiver), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--metrics-port and OTEL_METRICS_EXPORTER both say where the metrics go: use one" in done.stderr


def test_the_line_lane_counts_its_calls_in_stats_as_the_general_path_does() -> None:
    """``Executor.stats()`` after a job on the lane and after the same job on the general path: the same
    calls by (tool, status), whatever each line was (ok, a tool error, a timeout, an unknown tool, a line
    that is no call, a duplicate id)."""
    import io

    from tests.observability.tools_traced import LANE_TOOLS
    from toolfork.commands import _input
    from toolfork.commands._idset import IdSet
    from toolfork.commands._job import Job
    from toolfork.commands._lane_job import LaneJob
    from toolfork.commands._output import OutFile
    from toolfork.commands._progress import Progress
    from toolfork.executor import Executor

    lines = [{"id": f"ok{i}", "name": "traced_work", "arguments": {"label": str(i)}} for i in range(20)] + [
        {"id": "bad-args", "name": "traced_work", "arguments": {"label": 5}},
        {"id": "slow", "name": "hang", "arguments": {"seconds": 30}, "timeout": 0.5},
        {"id": "nope", "name": "teleport", "arguments": {}},
        {"id": "ok3", "name": "traced_work", "arguments": {"label": "dup"}}]
    data = _lines(lines).encode() + b"not json\n"
    counted = []
    for job_class in (LaneJob, Job):
        with Executor(LANE_TOOLS, mode="fork", workers=2) as executor:
            assert LaneJob.fits(executor)
            out = OutFile(None, "<null>", close=False)
            out.fd = os.open(os.devnull, os.O_WRONLY)
            try:
                job_class(executor, _input.LineSource(io.BytesIO(data)), out, Progress(None, None, 1.0), IdSet(),
                          64).run()
            finally:
                os.close(out.fd)
            counted.append(dict(executor.stats().calls))
    assert counted[0] == counted[1] == {("traced_work", "ok"): 20, ("traced_work", "error"): 1,
                                        ("hang", "timeout"): 1, ("(unknown)", "error"): 1}, counted
