"""A local Ray instance for the Ray backend's tests: 2 CPUs, started once per test session.

Starting Ray costs seconds, so the tests that need it share one per xdist worker: tests marked ``ray``
go to a few xdist groups (``RAY_GROUPS`` in tests/conftest.py), so that under ``--dist loadgroup``
each group lands in one xdist worker, which starts Ray once. At the end of the session Ray is shut
down and its processes must be gone.
Import ``ray_cluster`` from here into a test module to use it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from tests.conftest import allow_process

RAY_CPUS = 2
# What Ray's processes have in their command lines: the daemons, the per-node agents, the workers.
RAY_PROCESSES = ("raylet", "gcs_server", "ray::", "/site-packages/ray/")


def ray_daemons(root_pid: int | None = None) -> list[psutil.Process]:
    """Ray's processes (raylet, gcs_server, agents, workers) descending from ``root_pid`` (default: us)."""
    found = []
    try:
        children = psutil.Process(root_pid or os.getpid()).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for p in children:
        try:
            text = " ".join(p.cmdline()) or p.name()
            if any(name in text for name in RAY_PROCESSES) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return found


def wait_gone(processes: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    """The processes still alive after waiting up to ``seconds``."""
    end = time.monotonic() + seconds
    alive = processes
    while alive and time.monotonic() < end:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    return [p for p in alive if _alive(p)]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """``ray``, initialised with a local 2-CPU instance for the whole session, then shut down."""
    import ray

    if ray.is_initialized():  # someone else's instance: use it, leave it
        yield ray
        return
    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    daemons = ray_daemons()
    for p in daemons:
        allow_process(p.pid)
    try:
        yield ray
    finally:
        ray.shutdown()
        left = wait_gone(daemons + ray_daemons(), 15.0)  # orphaned daemons would not be descendants
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        assert not left, f"Ray left processes behind after shutdown: {[p.pid for p in left]}"
