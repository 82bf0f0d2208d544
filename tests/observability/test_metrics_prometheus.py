"""``--metrics-port``: ``toolfork worker`` and ``toolfork mcp serve --http`` serve /metrics, and a real
Prometheus server (Debian's ``prometheus``, started here on a free port with its own storage) scrapes
them and answers queries for the calls the test made; a port that is taken is a clear error."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfork.executor.stats import RESTART_CAUSES

REPO = Path(__file__).resolve().parents[2]
TOOLS_SPEC = "tests/observability/metrics_tools.py:TOOLS"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"  # scripts/services.sh installs it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TOOLFORK_MODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def toolfork(*args: str, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "toolfork.cli", *args], cwd=REPO, env=child_env(), text=True,
                            start_new_session=True, stderr=subprocess.PIPE, **popen)


def announced(proc: subprocess.Popen[str], *markers: str, timeout: float = 60.0) -> dict[str, str]:
    """The last word of the first stderr line holding each marker (the URLs a command prints), reading
    stderr until all were seen; the rest of stderr is drained so the command never blocks on it."""
    assert proc.stderr is not None
    found: dict[str, str] = {}
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while len(found) < len(markers):
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        line = proc.stderr.readline() if ready else ""
        if not line:
            raise AssertionError(f"the command did not announce {markers} (exit {proc.poll()}): {''.join(seen)}")
        seen.append(line)
        for marker in markers:
            if marker in line and marker not in found:
                found[marker] = line.rsplit(" ", 1)[-1].strip()
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return found


def end(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)


@contextlib.contextmanager
def prometheus(target: str, tmp_path: Path) -> Iterator[str]:
    """A Prometheus server scraping ``target`` (HOST:PORT) every second; yields its base URL."""
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                      "scrape_configs:\n  - job_name: toolfork\n    static_configs:\n"
                      f"      - targets: ['{target}']\n")
    port = free_port()
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Prometheus did not get ready"
            time.sleep(0.2)
        yield url
    finally:
        end(proc)  # type: ignore[arg-type]
        log.close()


def query(url: str, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
    """An instant query: labels (without __name__, job, instance, and the otel_scope_* labels newer exporters
    add) -> value."""
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}",
                                timeout=10) as r:
        answer = json.load(r)
    assert answer["status"] == "success", answer
    out = {}
    for item in answer["data"]["result"]:
        labels = tuple(sorted((k, v) for k, v in item["metric"].items()
                              if k not in ("__name__", "job", "instance") and not k.startswith("otel_scope_")))
        out[labels] = float(item["value"][1])
    return out


def until(check: Any, timeout: float = 60.0) -> Any:
    """Ask ``check()`` until it returns something truthy (Prometheus scrapes every second)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"not seen within {timeout}s; last answer: {last!r}")


def test_a_real_prometheus_scrapes_the_worker_and_sees_its_calls(tmp_path: Path) -> None:
    worker = toolfork("worker", "--tools", TOOLS_SPEC, "--workers", "2", "--metrics-port", "0",
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        metrics_url = announced(worker, "metrics at http://")["metrics at http://"]
        assert metrics_url.startswith("http://127.0.0.1:") and metrics_url.endswith("/metrics")
        assert worker.stdin is not None and worker.stdout is not None
        calls = [{"id": f"a{i}", "name": "add", "arguments": {"a": i, "b": 1}} for i in range(5)]
        calls.append({"id": "d", "name": "die", "arguments": {}})
        worker.stdin.write("".join(json.dumps(c) + "\n" for c in calls))
        worker.stdin.flush()
        statuses = sorted(json.loads(worker.stdout.readline())["status"] for _ in calls)
        assert statuses == ["crashed"] + ["ok"] * 5
        target = metrics_url.removeprefix("http://").removesuffix("/metrics")
        with prometheus(target, tmp_path) as prom:
            calls_seen = until(lambda: (q := query(prom, "toolfork_calls_total")) and len(q) == 2 and q)
            assert calls_seen == {(("gen_ai_tool_name", "add"), ("toolfork_call_status", "ok")): 5.0,
                                  (("gen_ai_tool_name", "die"), ("toolfork_call_status", "crashed")): 1.0}
            restarts = query(prom, "toolfork_worker_restarts_total")
            assert restarts == {(("toolfork_restart_cause", cause),): 1.0 if cause == "crash" else 0.0
                                for cause in RESTART_CAUSES}
            assert until(lambda: query(prom, "toolfork_workers") == {
                (("toolfork_worker_state", "busy"),): 0.0, (("toolfork_worker_state", "idle"),): 2.0})
            counts = query(prom, "toolfork_call_duration_seconds_count")
            assert counts[(("gen_ai_tool_name", "add"), ("toolfork_call_status", "ok"))] == 5.0
            quick = query(prom, 'toolfork_call_duration_seconds_bucket{gen_ai_tool_name="add",le="0.25"}')
            assert list(quick.values()) == [5.0]  # buckets in seconds: a trivial call is under 0.25 s
            # more calls: the next scrapes see them
            worker.stdin.write("".join(json.dumps({**c, "id": c["id"] + "x"}) + "\n" for c in calls[:5]))
            worker.stdin.flush()
            for _ in range(5):
                assert json.loads(worker.stdout.readline())["status"] == "ok"
            until(lambda: query(prom, 'toolfork_calls_total{toolfork_call_status="ok"}')
                  == {(("gen_ai_tool_name", "add"), ("toolfork_call_status", "ok")): 10.0})
        worker.stdin.close()
        assert worker.wait(30) == 0
    finally:
        end(worker)


def test_mcp_serve_http_serves_metrics_of_its_calls() -> None:
    from toolfork.executor import Executor, ToolCall
    from toolfork.mcp import MCPConnector

    server = toolfork("mcp", "serve", "--tools", TOOLS_SPEC, "--workers", "2", "--http", "127.0.0.1:0",
                      "--metrics-port", "0", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        urls = announced(server, "metrics at http://", "listening on http://")
        connector = MCPConnector(url=urls["listening on http://"])
        try:
            with Executor([connector], mode="sequential") as ex:
                assert ex.run([ToolCall("1", "add", {"a": 1, "b": 2})])[0].status == "ok"
        finally:
            connector.close()
        with urllib.request.urlopen(urls["metrics at http://"], timeout=10) as r:
            text = r.read().decode()
        line = next(x for x in text.splitlines() if x.startswith("toolfork_calls_total{"))
        assert 'gen_ai_tool_name="add"' in line and 'toolfork_call_status="ok"' in line and line.endswith(" 1.0")
        assert 'toolfork_workers{' in text
    finally:
        end(server)


@pytest.mark.parametrize("command", [["worker"], ["mcp", "serve", "--http", "127.0.0.1:0"]])
def test_a_port_in_use_is_a_clear_error_and_leaves_nothing_running(command: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = toolfork(*command, "--tools", TOOLS_SPEC, "--workers", "1", "--metrics-port", str(port),
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            end(proc)
    assert proc.returncode == 2, err
    assert f"--metrics-port: cannot listen on 127.0.0.1:{port}: Address already in use" in err


def test_metrics_host_without_a_port_and_a_bad_port_are_usage_errors() -> None:
    proc = toolfork("worker", "--tools", TOOLS_SPEC, "--metrics-host", "0.0.0.0", stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--metrics-host needs --metrics-port" in err
    proc = toolfork("worker", "--tools", TOOLS_SPEC, "--metrics-port", "70000", stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "a port is a number from 0 to 65535, got '70000'" in err
