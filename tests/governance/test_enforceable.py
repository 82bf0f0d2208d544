"""Fail closed: a strict limit this host cannot enforce refuses, naming the field and why; a
best-effort one is logged; everything this host can enforce passes."""

from __future__ import annotations

import logging

import pytest

from toolfork.governance import Limits, LimitsNotEnforceable, check, unenforceable
from toolfork.governance.verdict import CAP_SYS_ADMIN, CAP_SYS_RESOURCE, has_capability

from .forked import become_nobody, in_child

EVERYTHING_BUT_PROCESSES = Limits(memory_mb=256, cpu_s=2, file_size_mb=8, open_files=64, network=False,
                                  read_paths=["/"], write_paths=["/tmp"])


def test_what_this_kernel_can_enforce_passes() -> None:
    assert unenforceable(EVERYTHING_BUT_PROCESSES) == []
    assert check(EVERYTHING_BUT_PROCESSES) == []


def test_processes_for_a_privileged_worker_refuse_to_start_naming_the_limit_and_why() -> None:
    assert has_capability(CAP_SYS_ADMIN) or has_capability(CAP_SYS_RESOURCE), "these tests run as root"
    # a warm worker's (guard-rail) limits: a sandboxed call's processes are its cgroup's (below)
    strict = Limits(memory_mb=256, cpu_s=2, file_size_mb=8, open_files=64, processes=4)
    with pytest.raises(LimitsNotEnforceable) as caught:
        check(strict, where="tool 'run_snippet'")
    text = str(caught.value)
    assert text.startswith("tool 'run_snippet': processes=4 cannot be enforced here: RLIMIT_NPROC")
    assert "CAP_SYS_ADMIN" in text and "enforce='best-effort'" in text
    assert [m.field for m in caught.value.missing] == ["processes"]


def test_processes_of_a_sandboxed_call_are_its_cgroups_pids_max_as_root_too() -> None:
    from toolfork.governance import cgroup

    asked = EVERYTHING_BUT_PROCESSES.merged_over(Limits(processes=4))
    if cgroup.probe().ok:
        assert unenforceable(asked) == []
    else:  # no cgroup for this root: RLIMIT_NPROC does not bind it, so it is refused as for a warm worker
        assert "processes" in [m.field for m in unenforceable(asked)]


def test_best_effort_logs_what_is_not_applied(caplog: pytest.LogCaptureFixture) -> None:
    lenient = Limits(processes=4, memory_mb=64, enforce="best-effort")
    with caplog.at_level(logging.WARNING, logger="toolfork.governance"):
        missing = check(lenient, where="Executor")
    assert [m.field for m in missing] == ["processes"]
    assert "Executor: not applied (enforce='best-effort'): processes=4 cannot be enforced here" in caplog.text


def test_an_unprivileged_worker_can_enforce_processes() -> None:
    def body() -> list[str]:
        become_nobody()
        return [m.field for m in unenforceable(Limits(processes=4, memory_mb=64))]

    assert in_child(body).value == []
