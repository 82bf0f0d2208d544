"""How many sessions one host holds is set by ``max_sessions`` and the hard limit on open files, never
by an EMFILE from deep inside: each case runs ``many_sessions`` in a fresh interpreter, so the limit it
sets stays there. Real processes; bounds, not timings (``python -m tests.executor.many_sessions 1024
keep 1000 --measure`` prints the times and the memory)."""

from __future__ import annotations

import resource
from typing import Any

import pytest

from tests.redteam.conftest import reported


def opened(soft: int, hard: str, n: int) -> dict[str, Any]:
    return reported("tests.executor.many_sessions", str(soft), hard, str(n), timeout=280)


@pytest.mark.timeout(300)
def test_a_thousand_sessions_open_under_a_soft_limit_of_1024() -> None:
    """Soft limit 1,024, the hard one the machine's: 1,000 sessions on one executor each answer their
    own call (the soft limit is raised to the hard one; the host holds past select()'s 1,024
    descriptors), one supervisor forked them all, and every process goes at close."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 8192:
        pytest.skip(f"the hard limit on open files here is {hard}: 1,000 sessions need about 4,100")
    seen = opened(1024, "keep", 1000)
    assert seen["error"] is None, seen["error"]
    assert (seen["opened"], seen["own"], seen["pids"], seen["supervisors"]) == (1000, 1000, 1000, 1), seen
    assert seen["host_fds"] > 1024, seen
    assert seen["batch"] == "ok"
    assert seen["left"] == [], f"processes left behind: {seen['left']}"


@pytest.mark.timeout(300)
def test_past_a_hard_limit_of_1024_opening_says_which_limit_and_how_to_raise_it() -> None:
    """Soft and hard limit 1,024: opening stops with ``TooManySessions`` naming the limit and
    ``ulimit -n`` (not EMFILE), after well over 200 sessions; the open ones answer their own calls, the
    host still runs a batch, a closed session makes room for a new one, and every process goes."""
    seen = opened(1024, "1024", 1000)
    assert seen["error"] is not None and seen["error"].startswith("TooManySessions: "), seen["error"]
    assert "1024 open files" in seen["error"] and "ulimit -n" in seen["error"], seen["error"]
    assert 200 <= seen["opened"] < 256, seen
    assert seen["own"] == seen["opened"] and seen["pids"] == seen["opened"], seen
    assert seen["host_fds"] < 1024, seen
    assert seen["batch"] == "ok" and seen["again"] == 42, seen
    assert seen["left"] == [], f"processes left behind: {seen['left']}"
