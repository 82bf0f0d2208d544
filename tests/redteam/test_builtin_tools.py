"""Red team #10: bad input to the built-in tools, through a real forked executor. Every bound must
answer at once with an error naming it; a write must never be sent twice."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from tests.toolkits.fakeservers import FakeZep, Recorded, Reply
from toolfork import tool
from toolfork.executor import Executor, ToolCall
from toolfork.toolkits import CalculatorToolkit, ZepMemoryToolkit
from toolfork.toolkits.calculator import MAX_NUMBERS, MAX_ROUND_DIGITS
from toolfork.toolkits.http import RetryPolicy

# Each of these took minutes of a worker's CPU (or would, unbounded); with a 20 s timeout a regression
# shows as "timeout" instead of hanging the suite.
EXPENSIVE = [
    ("round(7, -10**8)", f"|ndigits| <= {MAX_ROUND_DIGITS}"),
    ("round(1, -(10**9))", f"|ndigits| <= {MAX_ROUND_DIGITS}"),
    ("9**9**9**9", "too large"),
    ("(10**3000)**4", "too large"),
    ("factorial(10**6)", "factorial is limited"),
    ("2**9999 * 2**9999", "too large"),
    ("pow(3, 10**8)", "too large"),
    ("1 << 10**9", "not allowed"),
    ("1" + "0" * 2000, "longer than"),
]


def test_calculator_bounds_every_argument_that_scales_work() -> None:
    calls = [ToolCall(f"e{i}", "evaluate", {"expression": e}) for i, (e, _) in enumerate(EXPENSIVE)]
    calls += [ToolCall("sum", "sum", {"numbers": [1.0] * (MAX_NUMBERS + 1)}),
              ToolCall("var", "variance", {"numbers": [1.0] * (MAX_NUMBERS + 1)}),
              ToolCall("fine", "evaluate", {"expression": "round(123456, -3) + round(2.5678, 2)"})]
    with Executor([CalculatorToolkit()], mode="fork", workers=2, timeout=20) as ex:
        results = ex.run(calls)
    for r, (expression, bound) in zip(results, EXPENSIVE, strict=False):
        assert r.status == "ok" and r.output is not None and r.output.is_error, (expression, r)
        assert bound in r.output.as_text(), (expression, r.output.as_text())
    for r in results[len(EXPENSIVE):-1]:
        assert r.output is not None and r.output.is_error and f"the limit is {MAX_NUMBERS}" in r.output.as_text()
    assert results[-1].output is not None and results[-1].output.data == 123002.57


class ZepThatStoresThenFails(FakeZep):
    """Stores the memory, then answers 502 (a proxy timing out after the write): the worst case for a
    client that retries."""

    def handle(self, req: Recorded) -> Reply:
        reply = super().handle(req)
        if req.method == "POST" and req.path.endswith("/graph") and reply.status < 300:
            return Reply(502, {"message": "bad gateway"})
        return reply


def test_zep_add_memory_is_not_sent_twice_after_a_5xx() -> None:
    with ZepThatStoresThenFails() as server:
        server.users["u1"] = {"user_id": "u1", "uuid": "uuid-u1"}
        toolkit = ZepMemoryToolkit("u1", server.api_key, base_url=server.url + "/api/v2",
                                   retry=RetryPolicy(retries=3, backoff=0.01))
        with Executor([toolkit], mode="fork", workers=1, timeout=30) as ex:
            [add] = ex.run([ToolCall("a", "zep_add_memory", {"content": "likes tea"})])
            # A search is a POST too, but only reads: it is retried after a 5xx.
            server.script(Reply(503, {"message": "busy"}))
            [search] = ex.run([ToolCall("s", "zep_search_memory", {"query": "tea"})])
        posts = [r for r in server.requests if r.method == "POST" and r.path.endswith("/graph")]
        searches = [r for r in server.requests if r.path.endswith("/graph/search")]
        assert len(posts) == 1 and len(server.episodes["u1"]) == 1  # stored once, never resent
        assert add.output is not None and add.output.is_error and "not retried" in add.output.as_text()
        assert len(searches) == 2
        assert search.status == "ok" and search.output is not None and not search.output.is_error
        assert "likes tea" in search.output.as_text()


@tool
def backoff_draws() -> list[float]:
    """The first backoff delays this worker would wait."""
    time.sleep(0.05)  # long enough that a batch spreads over both workers
    policy = RetryPolicy(retries=3, backoff=1.0)
    return [os.getpid(), *(policy.delay(0, None) for _ in range(3))]


def test_forked_workers_do_not_back_off_in_lockstep() -> None:
    with Executor([backoff_draws], mode="fork", workers=2) as ex:
        first = ex.run([ToolCall("a", "backoff_draws", {})])[0]
        results = ex.run([ToolCall(f"c{i}", "backoff_draws", {}) for i in range(8)])
    draws: dict[Any, list[float]] = {}
    for r in [first, *results]:
        assert r.output is not None
        pid, *delays = r.output.data
        assert all(0.5 <= d <= 1.0 for d in delays)
        draws.setdefault(pid, []).extend(delays)
    assert len(draws) == 2  # both workers, forked from one template, drew
    every = [d for ds in draws.values() for d in ds]
    assert len(set(every)) == len(every)  # no two draws alike, within a worker or across workers


@pytest.mark.parametrize("expression", ["round(7, -4000)", "round(7.5, 4000)"])
def test_the_round_bound_still_allows_its_limit(expression: str) -> None:
    from toolfork.toolkits.calculator import evaluate_expression

    assert evaluate_expression(expression) in (0, 7.5)
