"""The effective limits of a call are one rule (``governance.effective``): the host's governance in every
mode and the fork worker that applies them reach the same limits for the same tool and Executor. Checked
on the values (every mode, the worker's own object) and on a real fork worker's rlimits."""

from __future__ import annotations

import resource

import pytest

from tests.governance.executors import MIB, Executors, call, text
from toolfork import Limits, Tool
from toolfork.executor.backends.fork.limited import CallLimits
from toolfork.executor.backends.fork.pool import ForkBackend
from toolfork.executor.backends.ray import RayBackend
from toolfork.executor.backends.sequential import SequentialBackend
from toolfork.governance import Governance
from toolfork.governance.effective import EffectiveLimits


def _fn(x: int = 0) -> int:
    """Echo."""
    return x


def worker_rlimits() -> str:
    """The soft file-size limit in force where the call runs."""
    return str(resource.getrlimit(resource.RLIMIT_FSIZE)[0])


DEFAULT = Limits(file_size_mb=3, cpu_s=30, enforce="best-effort")
TOOLS = [
    Tool("own", fn=_fn, limits=Limits(file_size_mb=5, open_files=64)),  # own fields win, the default fills in
    Tool("plain", fn=_fn),  # the default alone
    Tool("says_enforce", fn=_fn, limits=Limits(enforce="best-effort")),  # limits nothing of its own
]
EXPECTED = {
    "own": Limits(file_size_mb=5, open_files=64, cpu_s=30, enforce="best-effort"),
    "plain": DEFAULT,
    "says_enforce": DEFAULT,
}


@pytest.mark.parametrize("backend", [ForkBackend, SequentialBackend, RayBackend], ids=lambda b: b.mode)
def test_every_mode_and_the_fork_worker_reach_the_same_limits(backend: type) -> None:
    governance = Governance(backend.capabilities, limits=DEFAULT)
    governance.register(TOOLS)  # best-effort: sequential and Ray take them (and say they cannot apply them)
    in_worker = CallLimits(governance.default)  # what a fork worker is handed (WorkerSetup.limits) and works out
    for tool in TOOLS:
        assert governance.limits_for(tool.name) == EXPECTED[tool.name], tool.name
        assert in_worker.effective.of(tool) == EXPECTED[tool.name], tool.name


def test_limits_that_limit_nothing_are_none_on_both_sides() -> None:
    for default in (None, Limits(), Limits(enforce="best-effort")):
        governance = Governance(ForkBackend.capabilities, limits=default)
        tools = [Tool("bare", fn=_fn), Tool("only_enforce", fn=_fn, limits=Limits(enforce="best-effort"))]
        governance.register(tools)
        for tool in tools:
            assert governance.limits_for(tool.name) is None
            assert EffectiveLimits(default).of(tool) is None
            assert CallLimits(default).effective.of(tool) is None


def test_the_worker_forgets_a_tools_limits_when_told() -> None:
    effective = EffectiveLimits(Limits(open_files=100))
    first = Tool("t", fn=_fn)
    assert effective.of(first) == Limits(open_files=100)
    replaced = Tool("t", fn=_fn, limits=Limits(open_files=50))
    assert effective.of(replaced) == Limits(open_files=100)  # remembered by name
    effective.forget()
    assert effective.of(replaced) == Limits(open_files=50)


def test_a_fork_worker_runs_the_call_under_the_limits_the_host_resolved(executors: Executors) -> None:
    tools = [Tool("own", fn=worker_rlimits, limits=Limits(file_size_mb=5, open_files=64)),
             Tool("plain", fn=worker_rlimits)]
    ex = executors(tools, workers=1, limits=Limits(file_size_mb=3))
    host = {t.name: ex.governance.limits_for(t.name) for t in tools}
    assert host == {"own": Limits(file_size_mb=5, open_files=64), "plain": Limits(file_size_mb=3)}
    own, plain = executors.run(ex, [call(1, "own"), call(2, "plain")])
    assert text(own) == str(5 * MIB)  # its own file_size_mb over the default's
    assert text(plain) == str(3 * MIB)  # the default's
