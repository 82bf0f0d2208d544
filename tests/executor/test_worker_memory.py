"""``max_worker_memory_mb`` counts a worker's own memory: the pages it shares with the host (all of the
host's heap, right after the fork) do not make it recycle; what a tool adds does."""

from __future__ import annotations

import os
from typing import Any

import pytest

from toolfork import tool
from toolfork.executor import Executor, ToolCall

KEPT: list[bytes] = []  # in a worker: what ``hold`` allocated, kept for the worker's life


@tool
def hold(mb: int) -> int:
    """Allocate (and touch) mb MiB that stay in this worker; return the worker's pid.

    Args:
        mb: how many MiB
    """
    if mb:
        KEPT.append(os.urandom(1) * (mb << 20))
    return os.getpid()


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


@pytest.mark.timeout(180)
def test_a_large_host_does_not_make_every_call_replace_its_worker() -> None:
    """The host holds 300 MB it has touched; the cap is 100 MB. Every worker's resident set is above the
    cap (it maps the host's pages), yet its own memory is not: no worker is replaced. A tool that keeps
    150 MB is over the cap: its worker is replaced after that call, and no call fails."""
    ballast: Any = os.urandom(1) * (300 << 20)
    try:
        with Executor([hold], mode="fork", workers=2, max_worker_memory_mb=100) as ex:
            first = set(ex.backend.worker_pids)  # type: ignore[attr-defined]
            assert all(_rss_mb(pid) > 100 for pid in first)  # what the old check compared: over the cap
            results = ex.run([ToolCall(f"c{i}", "hold", {"mb": 0}) for i in range(30)])
            assert [r.status for r in results] == ["ok"] * 30
            assert {r.output.data for r in results} <= first  # the same two workers served all 30
            [grown] = ex.run([ToolCall("g", "hold", {"mb": 150})])
            assert grown.status == "ok"
            after = ex.run([ToolCall(f"d{i}", "hold", {"mb": 0}) for i in range(6)])
            assert [r.status for r in after] == ["ok"] * 6
            assert grown.output.data not in {r.output.data for r in after}  # replaced between calls
            assert grown.output.data not in ex.backend.worker_pids  # type: ignore[attr-defined]
    finally:
        del ballast
