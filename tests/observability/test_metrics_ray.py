"""``Executor.stats()`` in Ray mode: what Ray can tell (tasks in flight of ``workers``, calls not yet sent,
calls by tool and status); Ray replaces its own workers, so there are no restarts to count."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.executor.conftest_ray import ray_cluster  # noqa: F401 - a fixture
from tests.observability.metrics_tools import TOOLS
from tests.observability.test_metrics_stats import call, eventually
from toolfork.executor import Executor

pytestmark = pytest.mark.ray  # in one of the Ray xdist groups (tests/conftest.py, RayGroups)


def test_ray_stats_count_tasks_in_flight_and_calls(ray_cluster: Any, tmp_path: Path) -> None:  # noqa: F811
    gate = tmp_path / "gate"
    with Executor(TOOLS, mode="ray", workers=2) as ex:
        s = ex.stats()
        assert (s.mode, s.workers, s.busy, s.idle, s.queued) == ("ray", 2, 0, 2, 0)
        t = threading.Thread(target=ex.run, args=([call(i, "hold", gate=str(gate)) for i in range(3)]
                                                  + [call("f", "fail")],))
        t.start()
        try:
            eventually(lambda: ex.stats().busy == 2, timeout=60)
            s = ex.stats()
            assert (s.busy, s.idle, s.queued) == (2, 0, 2)  # at most `workers` tasks in flight
        finally:
            gate.touch()
            t.join(120)
        s = ex.stats()
    assert (s.busy, s.idle, s.queued) == (0, 2, 0)
    assert dict(s.calls) == {("hold", "ok"): 3, ("fail", "error"): 1}
    assert dict(s.restarts) == {} and s.template_restarts == 0
