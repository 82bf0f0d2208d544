"""Telemetry never stops or stalls a job: with a bad ``OTEL_*`` setting a real ``toolfork run`` warns,
naming it, and runs untraced; with a collector that accepts and never answers, its exit waits for
telemetry at most ``EXIT_BOUND_S`` in all (the SDK alone waits about half a minute)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.conftest import ROOT
from toolfork.executor.tracing.providers import EXIT_BOUND_S

TOOLS = ["--tools", "tests/observability/tools_traced.py:LANE_TOOLS"]
CALLS = "".join(json.dumps({"id": f"c{i}", "name": "traced_work", "arguments": {"label": f"c{i}"}}) + "\n"
                for i in range(3))
MARGIN_S = 10.0  # on top of the bound: a loaded machine's start and end of a process


def _env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLFORK_"))}
    return {**env, "PYTHONPATH": str(ROOT), "OTEL_LOGS_EXPORTER": "none", **settings}


def _run(tmp_path: Path, **settings: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    out = tmp_path / "out.jsonl"
    done = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", "-", "-o", str(out), "--workers", "1",
                           *TOOLS], input=CALLS, cwd=ROOT, env=_env(**settings), capture_output=True, text=True,
                          timeout=120)
    return done, [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


@pytest.mark.parametrize(("settings", "named"), [
    ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "-5"}, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"),
    ({"OTEL_TRACES_EXPORTER": "console", "OTEL_ATTRIBUTE_COUNT_LIMIT": "many"}, "OTEL_ATTRIBUTE_COUNT_LIMIT"),
    ({"OTEL_TRACES_EXPORTER": "no_such_exporter"}, "no_such_exporter"),
    ({"OTEL_METRICS_EXPORTER": "\x1b]0;title\x07"}, "\\x1b]0;title\\x07"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}, "carrier-pigeon"),
])
def test_a_bad_setting_is_a_warning_naming_it_and_the_job_runs(tmp_path: Path, settings: dict[str, str],
                                                               named: str) -> None:
    done, records = _run(tmp_path, **settings)
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in records] == ["ok"] * 3
    assert "Traceback" not in done.stderr, done.stderr
    [warning] = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert "OpenTelemetry could not be set up" in warning and named in warning and "running without it" in warning
    assert "\x1b" not in done.stderr


def test_a_collector_address_that_is_not_a_url_leaves_the_job_alone(tmp_path: Path) -> None:
    done, records = _run(tmp_path, OTEL_TRACES_EXPORTER="otlp_proto_http", OTEL_METRICS_EXPORTER="otlp_proto_http",
                         OTEL_EXPORTER_OTLP_ENDPOINT="::not a url::")
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in records] == ["ok"] * 3


@pytest.fixture
def silent_collector() -> Iterator[str]:
    """A TCP server that accepts every connection and never answers (nor closes one)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def test_a_collector_that_never_answers_delays_the_exit_by_the_bound_at_most(tmp_path: Path,
                                                                             silent_collector: str) -> None:
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "toolfork.cli", "run", "-", "-o", str(out), "--workers", "1",
                             *TOOLS], stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=_env(OTEL_TRACES_EXPORTER="otlp_proto_http", OTEL_METRICS_EXPORTER="otlp_proto_http",
                                     OTEL_EXPORTER_OTLP_ENDPOINT=silent_collector))
    try:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(CALLS)
        proc.stdin.close()
        first = proc.stderr.readline()  # the start line: configured, pool started
        started = time.monotonic()
        rest = proc.stderr.read()
        code = proc.wait(timeout=120)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, first + rest
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == ["ok"] * 3
    assert took < EXIT_BOUND_S + MARGIN_S, (took, first + rest)
