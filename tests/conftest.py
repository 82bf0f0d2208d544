"""Suite-wide guard: a test must not leave a process behind.

Every test is checked: processes that are descendants of the test process after the test, and were not
before it, must be gone within a few seconds, or the test fails naming them. Long-lived servers that a
session fixture starts on purpose (PostgreSQL, MariaDB, Ray) register themselves with
``allow_process`` and are left alone.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import psutil
import pytest

# A suite started in the background of a script (`./scripts/test.sh &`, nohup, some CI runners) inherits
# SIGINT ignored, and an ignored signal stays ignored across exec: every command a test starts would then
# shrug off the Ctrl-C the test sends it. The suite runs as if from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Ray starts its workers at nice 15 (its ``worker_niceness``), so that a driver on the same machine comes
# first. In this suite every other test's process is at nice 0: a Ray worker then gets a few percent of a
# busy core, and a Ray test that takes 4 s alone took over a minute beside the rest of the suite. The
# suite's Ray instances (the session's, and those the tests and the commands they run start) run their
# workers at the suite's own priority; docs/ray.md tells users about the default.
os.environ.setdefault("RAY_worker_niceness", "0")

_ALLOWED: set[int] = set()
_ALLOWED_NAMES = ("postgres", "mariadbd", "mysqld", "raylet", "gcs_server", "ray::", "ray_", "dashboard",
                  "plasma_store", "log_monitor", "runtime_env", "monitor.py", "default_worker")


def allow_process(pid: int) -> None:
    """Exempt a deliberately long-lived process (and its descendants) from the leak check."""
    _ALLOWED.add(pid)


_PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")  # Linux, CONFIG_PROC_CHILDREN


def _descendant_pids() -> set[int]:
    """This process's descendants, from each thread's ``/proc/<pid>/task/<tid>/children``: some
    microseconds, where psutil's ``children(recursive=True)`` reads every process on the machine (a few
    milliseconds beside Ray and the servers, twice a test)."""
    if not _PROC_CHILDREN:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    found: set[int] = set()
    stack = [os.getpid()]
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone meanwhile
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            for kid in kids:
                if kid not in found:
                    found.add(kid)
                    stack.append(kid)
    return found


def _descendants(pids: set[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        try:
            found.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return found


def _is_allowed(p: psutil.Process) -> bool:
    try:
        if p.pid in _ALLOWED or any(a.pid in _ALLOWED for a in p.parents()):
            return True
        text = " ".join(p.cmdline()) or p.name()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return True
    return any(name in text for name in _ALLOWED_NAMES)


def _describe(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:80] or p.name()
    except psutil.Error:
        return "?"


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture(autouse=True)
def no_process_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    before = _descendant_pids()
    yield
    deadline = time.monotonic() + 5.0
    while True:
        left = [p for p in _descendants(_descendant_pids() - before) if _alive(p) and not _is_allowed(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if left:
        described = ", ".join(f"{p.pid} ({_describe(p)})" for p in left if _alive(p))
        if described:
            for p in left:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            pytest.fail(f"test left processes behind: {described}")


# The tests on the session's Ray instance (``ray_cluster``, marked ``ray``) go to this many xdist groups,
# round robin. Each xdist worker that takes a group starts its own instance, and the first calls on it
# start its workers: about 13 CPU-seconds in all. One group: the suite is CPU-bound on 2 cores, and the
# group's two minutes of mostly waiting for Ray's wake-ups run beside the other workers' tests.
RAY_GROUPS = 1


class RayGroups:
    """Puts each test that uses the session's Ray instance in one of ``RAY_GROUPS`` xdist groups, before
    pytest-xdist reads the groups (hence a plugin with ``tryfirst``, registered in ``pytest_configure``)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        ray_items = [item for item in items if item.get_closest_marker("ray") is not None
                     and item.get_closest_marker("xdist_group") is None]
        for i, item in enumerate(ray_items):
            item.add_marker(pytest.mark.xdist_group(f"ray{i % RAY_GROUPS}"))


# Fixtures that need a server scripts/test.sh installs (database servers, the npm MCP packages, the SDK's
# everything-server), and modules that start one (Prometheus): their tests are marked ``services``, so that
# ``scripts/test.sh --fast`` can leave them out with ``-m "not (services or ray or postgres or mysql)"``.
SERVICE_FIXTURES = frozenset({"pg_server", "pg_db", "mariadb_server", "mariadb_db", "npm_tools",
                              "sdk_everything_server"})
SERVICE_MODULES = frozenset({"test_metrics_prometheus.py"})


class ServiceMarks:
    """Marks ``services`` every test that needs one, before the ``-m`` selection reads the marks."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            fixtures = set(getattr(item, "fixturenames", ()))
            if fixtures & SERVICE_FIXTURES or item.path.name in SERVICE_MODULES:
                item.add_marker(pytest.mark.services)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(RayGroups(), "toolfork-ray-groups")
    config.pluginmanager.register(ServiceMarks(), "toolfork-service-marks")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep ``--dist loadgroup`` groups working. pytest-xdist tags a grouped test by rewriting
    ``item._nodeid``; pytest 9.2 reads a node's id from ``item._id`` instead, so the tag is lost and the
    groups are silently ignored (every xdist worker then starts its own Ray, and the bench's tiny runs are
    made twice). Where the tag did not take, set it the way this pytest reads it."""
    if not getattr(config.option, "loadgroup", False):  # xdist sets it in each worker under --dist loadgroup
        return
    try:
        from _pytest.nodes import coerce_node_id
    except ImportError:  # an older pytest, where xdist's own tag works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = coerce_node_id(item.nodeid + suffix)
