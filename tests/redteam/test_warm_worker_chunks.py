"""Within a chunk of quick calls the warm worker looks at its timers only at the chunk's end (and after a
call that used the ``signal`` module's setters): a timer a quick call armed through a setter bound
before the fork must still be disarmed before the worker's next call."""

from __future__ import annotations

from typing import Any

import pytest

from tests.redteam.hostile_tools import WARM_TOOLS
from toolfork.executor import Executor, ToolCall


def _call(cid: str, name: str, timeout: float | None = None, **arguments: Any) -> ToolCall:
    return ToolCall(cid, name, arguments, timeout=timeout)


@pytest.mark.parametrize("place", ["first", "last"])
@pytest.mark.timeout(120)
def test_a_bound_alarm_armed_inside_a_chunk_does_not_go_off_in_a_later_call(place):
    """A quick call arms alarm(1) through ``from signal import alarm`` (no wrapper sees it), first or
    last in its chunk; the next batch, 3 s of sleep on the same worker, finishes ok."""
    with Executor(WARM_TOOLS, mode="fork", workers=1, timeout=90) as ex:
        for i in range(10):  # both tools are quick now: the pool chunks them
            ex.run([_call(f"w{i}", "mess_signals", what="nothing"), _call(f"e{i}", "echo", text="x")])
        arm = _call("m", "mess_signals", what="bound_alarm")
        other = _call("e", "echo", text="y")
        results = ex.run([arm, other] if place == "first" else [other, arm])
        assert [r.status for r in results] == ["ok", "ok"]
        assert results[0].worker_pid == results[1].worker_pid  # one chunk, one worker
        [innocent] = ex.run([_call("s", "busy", seconds=3)])
        assert innocent.status == "ok", innocent.error
        assert innocent.worker_pid == results[0].worker_pid
