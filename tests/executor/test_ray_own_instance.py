"""Ray instances an Executor starts for itself (no address given): it stops the instance it started when
its last user closes, and a SIGKILLed host leaves no Ray process behind.

Each test starts a Ray instance of its own in a subprocess, not the session's shared one
(``conftest_ray.ray_cluster``): so these tests are an xdist group of their own and run beside the
shared instance's group rather than after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tests.executor.test_ray_backend import _pid_gone

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray_own_instance")]

ROOT = Path(__file__).resolve().parents[2]


def test_the_executor_starts_and_stops_its_own_ray_when_none_is_running():
    script = textwrap.dedent(f"""
        import json, os, sys
        sys.path.insert(0, {str(ROOT)!r})
        import psutil, ray
        from tests.executor import tools_for_tests as T
        from toolfork.executor import Executor, ToolCall

        assert not ray.is_initialized()
        first = Executor([T.add], mode="ray", workers=2)
        cpus = ray.cluster_resources()["CPU"]
        second = Executor([T.add], mode="ray", workers=2)
        ray_processes = [p.pid for p in psutil.Process().children(recursive=True)]
        [r] = first.run([ToolCall("a", "add", {{"a": 20, "b": 22}})])
        first.close()
        still_up = ray.is_initialized()  # the second executor still needs it
        [s] = second.run([ToolCall("b", "add", {{"a": 1, "b": 1}})])
        second.close()
        after = ray.is_initialized()
        procs = []
        for pid in ray_processes:
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                pass
        gone, alive = psutil.wait_procs(procs, timeout=15)  # before this interpreter exits
        print(json.dumps({{"cpus": cpus, "answer": r.output.data, "still_up": still_up,
                           "second": s.output.data, "after": after, "ray_processes": ray_processes,
                           "left": [" ".join(p.cmdline())[:80] for p in alive]}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["cpus"] == (os.cpu_count() or 1)
    assert report["answer"] == 42 and report["second"] == 2
    assert report["still_up"] is True and report["after"] is False
    assert len(report["ray_processes"]) >= 3, "Ray's daemons were not found while it ran"
    assert report["left"] == []  # raylet, gcs_server, the node's agents, the workers: none outlives close()
    assert all(_pid_gone(pid) for pid in report["ray_processes"])


def _ray_processes(marker: str, session: str) -> list[psutil.Process]:
    """The processes of one Ray instance: marked in their environment, or naming or holding open a file
    of its session directory (the agents rename themselves, hiding both command line and environment)."""
    found = []
    for p in psutil.process_iter():
        try:
            if (p.environ().get("TOOLFORK_RAY_INSTANCE") == marker or session in " ".join(p.cmdline())
                    or any(f.path.startswith(session) for f in p.open_files())):
                found.append(p)
        except psutil.Error:
            pass
    return [p for p in found if p.pid != os.getpid()]


def test_sigkill_of_a_host_that_started_ray_leaves_no_ray_process():
    """Ray's own processes do not all notice a dead driver; the watchdog kills what is left."""
    script = textwrap.dedent(f"""
        import json, os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from tests.executor import tools_for_tests as T
        from toolfork.executor import Executor, ToolCall
        from toolfork.executor.backends import ray_connection
        ex = Executor([T.sleep_for], mode="ray", workers=2)
        print(json.dumps({{"marker": ray_connection._watchdog.marker,
                          "session": ray_connection._session_dir(ray_connection.import_ray())}}), flush=True)
        ex.run([ToolCall(str(i), "sleep_for", {{"seconds": 60}}) for i in range(2)])
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True)
    try:
        info = json.loads(proc.stdout.readline())
        marker, session = info["marker"], info["session"]
        assert session.startswith("/")
        end = time.monotonic() + 30
        while len(_ray_processes(marker, session)) < 6 and time.monotonic() < end:  # daemons, agents, workers
            time.sleep(0.2)
        names = " ".join(p.name() for p in _ray_processes(marker, session))
        assert "Agent" in names, names  # the processes that used to outlive a killed host
        time.sleep(1.0)  # the calls are running
    finally:
        proc.kill()
        proc.wait(10)
    end = time.monotonic() + 20
    while _ray_processes(marker, session) and time.monotonic() < end:
        time.sleep(0.2)
    left = [" ".join(p.cmdline())[:60] for p in _ray_processes(marker, session)]
    assert left == []
