"""The benchmark harness's tiny run of the Ray-based executors (toolfork-ray, ray): each gives a figure or
a recorded failure, and Ray's own peer kills a hung task and isolates a crash.

Apart from tests/test_bench.py, in an xdist group of its own: this run starts Ray twice and takes about
as long as the other executors' run, so the two runs go on beside each other rather than one after
the other. No assertion here is about speed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_bench import RAY_BASED, _check_every_figure, _tiny_run
from toolfork.bench import default_executors

pytestmark = [pytest.mark.xdist_group("bench_ray"), pytest.mark.timeout(600)]


@pytest.fixture(scope="session")
def ray_tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    executors = [e for e in default_executors() if e in RAY_BASED]
    return _tiny_run(tmp_path_factory.mktemp("bench-ray-out"), executors)


def test_every_ray_executor_gives_a_figure_or_a_recorded_failure(ray_tiny_run: tuple[dict[str, Any], Path]) -> None:
    _check_every_figure(ray_tiny_run[0], ray=True)


def test_ray_kills_a_hung_task_and_isolates_a_crash(ray_tiny_run: tuple[dict[str, Any], Path]) -> None:
    cells = ray_tiny_run[0]["cells"]["ray"]
    if cells["hang"]["status"] == "n/a: ray not installed":
        pytest.fail("ray is a declared test dependency (the ray extra) but is not installed")
    assert cells["hang"]["metrics"]["hang_status"] == "timeout"
    assert cells["hang"]["metrics"]["hang_still_running"] == 0
    assert cells["crash"]["metrics"]["crash_status"] == "crashed"
    assert cells["crash"]["metrics"]["crash_results_back"] == 3
