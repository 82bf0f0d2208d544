"""A sandboxed call's limits bound the whole call, and nothing outside write_paths changes: attacked as
root and as nobody (scenarios in whole_call.py). Where no cgroup can be had (nobody, without a delegated
subtree), a limit only a cgroup bounds is refused at start, naming why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import USERS, run_scenario

users = pytest.mark.parametrize("user", USERS)
Attack = Callable[[str, str], dict[str, Any]]


@pytest.fixture
def whole(work: Path) -> Attack:
    def run(name: str, user: str) -> dict[str, Any]:
        return run_scenario(name, user, work, module="tests.redteam.sandbox.whole_call")

    return run


def bounded(ev: dict[str, Any], words: str, user: str) -> None:
    """The call came back LimitExceeded naming ``words``; or, where no cgroup can be had, its start was
    refused saying so (the best-effort run after it is weaker by definition: the refusal is the promise)."""
    if ev["cgroup"]:
        assert "refused" not in ev, ev
        assert ev["status"] == "error" and ev["error_type"] == "LimitExceeded", ev
        assert words in ev["error"], ev
        return
    assert "no cgroup can be had here" in ev["refused"] and "memory_mb=64" in ev["refused"], ev


@users
def test_cpu_of_children_counts_against_cpu_s(whole: Attack, user: str) -> None:
    ev = whole("cpu_children", user)
    if ev["cgroup"]:
        bounded(ev, "CPU time limit of 1 s", user)
        assert ev["said_at_start"] == [], ev
    else:  # no cgroup: cpu_s is held by forbidding children (said at start), so none could be started
        assert any("may start no other" in line for line in ev["said_at_start"]), ev
        assert "refused" not in ev and ev["status"] == "error", ev
        assert ev["error_type"] == "LimitExceeded" or "Resource temporarily unavailable" in ev["error"], ev


@users
def test_memory_of_children_counts_against_memory_mb(whole: Attack, user: str) -> None:
    bounded(whole("memory_children", user), "memory limit of 64 MB", user)


@users
def test_memfd_and_pipe_buffers_count_against_memory_mb(whole: Attack, user: str) -> None:
    bounded(whole("memfd_pipes", user), "memory limit of 64 MB", user)


@users
def test_a_child_oom_kill_is_named_by_the_host_whatever_the_tool_reports(whole: Attack, user: str) -> None:
    ev = whole("forged_oom", user)
    if ev["cgroup"]:
        assert ev["status"] == "error" and ev["error_type"] == "LimitExceeded", ev
        assert "memory limit of 64 MB" in ev["error"] and "together" in ev["error"], ev
        return
    bounded(ev, "memory limit of 64 MB", user)  # nobody: memory_mb of a sandbox is refused at start


@users
def test_the_call_cannot_lift_or_leave_its_cgroup(whole: Attack, user: str) -> None:
    ev = whole("lift_cgroup", user)
    bounded(ev, "memory limit of 64 MB", user)


@users
def test_no_metadata_changes_outside_write_paths(whole: Attack, user: str) -> None:
    ev = whole("metadata", user)
    assert ev["status"] == "ok", ev
    for target, routes in ev["output"].items():
        assert all(said != "done" for said in routes.values()), (target, routes)
        assert routes["chmod"] == routes["utime"] == routes["setxattr"] == "Read-only file system", routes
    assert ev["after"] == ev["before"], ev
    assert ev["planted"] == [], ev
    assert ev["inside"]["status"] == "ok" and set(ev["inside"]["output"].values()) == {"done"}, ev["inside"]


@users
def test_the_call_holds_no_descriptor_that_can_move_a_process_or_change_a_limit(whole: Attack, user: str) -> None:
    ev = whole("descriptors", user)
    assert ev["status"] == "ok", ev
    on_cgroups = [(fd, target, flags) for fd, target, flags in ev["output"] if target.startswith("/sys/fs/cgroup")]
    assert all(int(flags, 8) & 0o3 == 0 for _fd, _target, flags in on_cgroups), on_cgroups  # O_RDONLY only
    assert not any(target.endswith(("cgroup.procs", "tasks")) for _fd, target, _flags in on_cgroups), on_cgroups
    assert on_cgroups == [], on_cgroups  # its counters are read outside: by its outer and by the host
