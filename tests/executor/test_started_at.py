"""``ToolResult.started_at``: when each call started running, by the host's clock, for every kind of
result (ok, error, timeout, crashed, unknown tool) in every mode, through ``run`` and ``submit``."""

from __future__ import annotations

import time

import pytest

from tests.executor.tools_for_tests import exit_now, fail, sleep_for
from toolfork.executor import Executor, ToolCall


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_every_result_says_when_its_call_started(mode: str) -> None:
    calls = [ToolCall("long", "sleep_for", {"seconds": 0.6}),
             ToolCall("quick", "sleep_for", {"seconds": 0.0}),
             ToolCall("err", "fail", {"message": "no"}),
             ToolCall("unknown", "no_such_tool", {})]
    if mode == "fork":
        calls += [ToolCall("late", "sleep_for", {"seconds": 30}, timeout=0.5),
                  ToolCall("dead", "exit_now", {"code": 3})]
    before = time.time()
    with Executor([sleep_for, fail, exit_now], mode=mode, workers=3) as ex:
        results = ex.run(calls)
        single = ex.submit(ToolCall("single", "sleep_for", {"seconds": 0.0})).result()
    after = time.time()
    by_id = {r.call_id: r for r in [*results, single]}
    assert {r.status for r in results} >= ({"ok", "error", "timeout", "crashed"} if mode == "fork" else {"ok", "error"})
    for r in by_id.values():
        assert r.started_at is not None, r
        assert before <= r.started_at <= r.started_at + r.duration_s <= after + 0.01, (r, before, after)
    if mode == "fork":  # the quick call ran beside the long one, not after it
        assert by_id["quick"].started_at < by_id["long"].started_at + 0.5  # type: ignore[operator]
        assert by_id["late"].duration_s >= 0.45
    else:  # one after the other, in call order
        assert by_id["quick"].started_at >= by_id["long"].started_at + 0.55  # type: ignore[operator]
