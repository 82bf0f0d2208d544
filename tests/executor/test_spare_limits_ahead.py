"""A spare sets its call's limits while it waits for the call (``CallLimits.ahead``), and a one-shot's
rlimits are worked out once (``rlimits.applied(locked=True)``).

Each case runs in a forked child: the limits it sets are hard for good.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from collections.abc import Callable
from typing import Any

import pytest

from tests.procs import in_forked_child
from toolfork.executor.backends.fork import limited
from toolfork.executor.types import ToolResult
from toolfork.governance import Limits, rlimits, sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="a sandbox's spares exist on Linux only (the sandbox is Linux only)")

LIMITS = Limits(network=False, memory_mb=512, cpu_s=30, file_size_mb=8, processes=8)


def test_a_locked_applied_sets_the_signals_and_the_timer_and_leaves_the_rlimits() -> None:
    def body() -> dict[str, Any]:
        sandbox.lock_rlimits(LIMITS)
        before = {w: resource.getrlimit(w) for w in (resource.RLIMIT_AS, resource.RLIMIT_CPU,
                                                      resource.RLIMIT_FSIZE, resource.RLIMIT_NPROC)}
        xfsz_before = signal.getsignal(signal.SIGXFSZ)
        with rlimits.applied(LIMITS, locked=True):
            inside = {w: resource.getrlimit(w) for w in before}
            timer = signal.getitimer(signal.ITIMER_PROF)[0]
            xfsz = signal.getsignal(signal.SIGXFSZ)
        return {"same": inside == before, "timer": timer, "xfsz_handled": callable(xfsz),
                "timer_after": signal.getitimer(signal.ITIMER_PROF)[0],
                "xfsz_after": signal.getsignal(signal.SIGXFSZ) == xfsz_before}

    seen = in_forked_child(body)
    assert seen["same"] and seen["xfsz_handled"] and 29 < seen["timer"] < 31, seen
    assert seen["timer_after"] == 0 and seen["xfsz_after"], seen


def _ran() -> Callable[[Any], ToolResult]:
    def run(limit_hit: Any) -> ToolResult:
        return ToolResult("c", "t", "ok", worker_pid=os.getpid())
    return run


def test_a_spares_limits_set_ahead_serve_its_call_without_working_them_out_again() -> None:
    def body() -> dict[str, Any]:
        calls = limited.CallLimits(None, entered=LIMITS)
        calls.ahead(LIMITS)
        locked_ahead = resource.getrlimit(resource.RLIMIT_FSIZE)
        armed = signal.getitimer(signal.ITIMER_PROF)[0]
        again = []
        real = sandbox.lock_rlimits
        sandbox.lock_rlimits = lambda limits: again.append(limits) or real(limits)  # type: ignore[assignment]
        result = calls.run(LIMITS, "c", "t", os.getpid(), _ran())
        return {"fsize": locked_ahead, "armed": armed, "again": len(again), "status": result.status,
                "disarmed": signal.getitimer(signal.ITIMER_PROF)[0] == 0}

    seen = in_forked_child(body)
    assert seen["fsize"] == (8 << 20, 8 << 20), seen  # hard = soft, before any call came
    assert 29 < seen["armed"] < 31 and seen["again"] == 0, seen
    assert seen["status"] == "ok" and seen["disarmed"], seen


def test_limits_set_ahead_for_other_limits_are_not_used() -> None:
    other = LIMITS.model_copy(update={"memory_mb": 256})

    def body() -> dict[str, Any]:
        calls = limited.CallLimits(None, entered=LIMITS)
        calls.ahead(LIMITS)
        again = []
        real = sandbox.lock_rlimits
        sandbox.lock_rlimits = lambda limits: again.append(limits) or real(limits)  # type: ignore[assignment]
        result = calls.run(other, "c", "t", os.getpid(), _ran())
        return {"again": [lim.memory_mb for lim in again], "status": result.status}

    seen = in_forked_child(body)
    assert seen["again"] == [256] and seen["status"] == "ok", seen  # lowered at the call, as before


def test_no_limits_are_set_ahead_with_open_files_or_outside_a_sandbox() -> None:
    def body() -> list[bool]:
        with_files = limited.CallLimits(None, entered=LIMITS.model_copy(update={"open_files": 64}))
        with_files.ahead(LIMITS.model_copy(update={"open_files": 64}))
        warm = limited.CallLimits(None)
        warm.ahead(Limits(memory_mb=512))
        return [with_files._ahead is None, warm._ahead is None,
                resource.getrlimit(resource.RLIMIT_FSIZE)[1] == resource.RLIM_INFINITY]

    assert in_forked_child(body) == [True, True, True]
