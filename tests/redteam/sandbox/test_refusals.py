"""A sandboxed call is never run without its sandbox: where none can be made (an inline tool,
sequential mode, Ray's workers) the Executor refuses to start, naming why; best-effort says so at
WARNING. And the sandbox's own settings are checked where they are written."""

from __future__ import annotations

import pytest

from toolfork import Limits
from toolfork.executor import Executor
from toolfork.executor.backends.ray import RayBackend
from toolfork.governance import LimitsNotEnforceable
from toolfork.governance.enforceable import SandboxUnavailable
from toolfork.governance.limits import LimitsError
from toolfork.governance.policy import Governance
from toolfork.tools.tool import Tool


def where_am_i() -> int:
    """The pid this call runs as."""
    import os

    return os.getpid()


def test_an_inline_tool_that_asks_for_the_sandbox_is_refused() -> None:
    tool = Tool("inline_sandboxed", fn=where_am_i, inline=True, limits=Limits(sandbox=True))
    with pytest.raises(LimitsNotEnforceable, match=r"sandbox=True.*inline"):
        Executor([tool], workers=1)


def test_sequential_mode_refuses_a_sandboxed_default() -> None:
    with pytest.raises(LimitsNotEnforceable, match=r"sandbox=True.*sequential"):
        Executor([Tool("plain", fn=where_am_i)], mode="sequential", limits=Limits(sandbox=True))


def test_ray_mode_refuses_the_sandbox() -> None:
    governance = Governance(RayBackend.capabilities)
    with pytest.raises(LimitsNotEnforceable, match=r"sandbox=True.*Ray"):
        governance.register([Tool("plain", fn=where_am_i, limits=Limits(sandbox=True, env=["HOME"]))])


def test_best_effort_does_not_run_a_sandboxed_call_without_its_sandbox() -> None:
    """enforce="best-effort" lets a guard rail go unapplied, never the sandbox: an inline tool still
    refuses, naming why, and nothing ran in the host."""
    tool = Tool("inline_sandboxed", fn=where_am_i, inline=True,
                limits=Limits(sandbox=True, enforce="best-effort"))
    with pytest.raises(SandboxUnavailable, match=r"inline_sandboxed.*inline.*best-effort"):
        Executor([tool], workers=1)


def test_a_sandboxed_call_runs_in_the_sandbox() -> None:
    tool = Tool("sandboxed", fn=where_am_i, limits=Limits(sandbox=True))
    with Executor([tool], workers=1) as ex:
        (r,) = ex.run([{"id": "1", "name": "sandboxed", "arguments": {}}])
    assert r.status == "ok" and r.output is not None and r.output.data == 1  # PID 1 of its own namespace
    assert r.worker_pid is not None and r.worker_pid != 1


def test_sandbox_settings_are_checked_where_written() -> None:
    assert Limits(sandbox=True).sandboxed and Limits(network=False).sandboxed
    assert not Limits(memory_mb=8).sandboxed and not Limits(network=True, env=["A"]).sandboxed
    assert Limits.parse("sandbox=on,env=LANG:HOME") == Limits(sandbox=True, env=["HOME", "LANG"])
    for bad in ({"env": "HOME"}, {"env": ["A=B"]}, {"env": [""]}, {"sandbox": "yes"}):
        with pytest.raises(LimitsError, match=next(iter(bad))):
            Limits(**bad)
    with pytest.raises(LimitsError, match="sandbox"):
        Limits.parse("sandbox=maybe")
