"""Caps and rate limits shared by inline tools (run in the host) and pool tools (run in forked workers),
reached through every entry point at once: no mix may deadlock.

Every wait here is bounded (a future's ``result(timeout)``, a thread joined with a limit): a deadlock
fails the test, and the executors fixture's ``close()`` frees what hung. Each tool returns the
wall-clock start and end of its call, so the tests check from the outside that the group's cap held."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future

from tests.governance.executors import Executors, call, in_threads, max_overlap, stamps, text
from tests.governance.test_executor_caps import make, ok
from toolfork.executor.types import CallStarted, ToolResult

LIMIT_S = 60.0  # no call here needs more than a few seconds: reaching this is a deadlock


def group_tools() -> list:
    """An inline and a pool tool in group "g", a free pool tool, and a rate-limited inline and pool tool."""
    return [make("inline_g", inline=True, concurrency_group="g"), make("pool_g", concurrency_group="g"),
            make("free"), make("inline_rated", inline=True, rate_limit="20/s"), make("pool_rated", rate_limit="20/s")]


def test_an_inline_call_submitted_while_a_pool_call_of_its_group_runs_gets_its_turn(executors: Executors) -> None:
    ex = executors(group_tools(), workers=2, concurrency={"g": 1})
    pool = ex.submit(call("p", "pool_g", seconds=0.5))
    ex.submit(call("f", "free", seconds=0.0)).result(timeout=LIMIT_S)  # the pool is warm
    deadline = time.monotonic() + 10
    while ex.governance.caps.running_in_group("g") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    inline = ex.submit(call("i", "inline_g", seconds=0.1))
    results = executors.note(ex, [pool.result(timeout=LIMIT_S), inline.result(timeout=LIMIT_S)])
    ok(results)
    assert max_overlap([stamps(r) for r in results]) == 1
    assert stamps(results[1])[0] >= stamps(results[0])[1]  # the inline call waited for the pool call's slot


def test_an_inline_call_in_a_batch_started_inside_another_batchs_loop_waits_without_hanging_it(
        executors: Executors) -> None:
    """One thread: a stream's pool call holds the group's slot while the loop body runs an inline call
    of that group; this thread is the only one that can read the pool call's result."""
    ex = executors(group_tools(), workers=2, concurrency={"g": 1})

    def nested(_: str) -> list[ToolResult]:
        inner: list[ToolResult] = []
        outer: list[ToolResult] = []
        for event in ex.stream([call("outer", "pool_g", seconds=0.3)]):
            if type(event) is CallStarted:
                inner = ex.run([call("inner", "inline_g", seconds=0.0)])
            elif hasattr(event, "result"):
                outer.append(event.result)
        return outer + inner

    results = executors.note(ex, in_threads(nested, ["one"], limit=LIMIT_S)[0])
    ok(results)
    assert [r.call_id for r in results] == ["outer", "inner"]
    assert max_overlap([stamps(r) for r in results]) == 1


def test_a_pool_call_waiting_for_the_slot_of_a_running_inline_call_starts_when_it_ends(
        executors: Executors) -> None:
    """Nothing but the inline call's end can let the pool call in: the slot it gives back must reach the
    driver, which has no deadline and no other call to wake it."""
    ex = executors(group_tools(), workers=2, concurrency={"g": 1})
    ex.run([call("warm", "free")])

    def inline_batch() -> list[ToolResult]:
        return ex.run([call("i", "inline_g", seconds=1.0)])

    holder: list[list[ToolResult]] = []
    t = threading.Thread(target=lambda: holder.append(inline_batch()))
    t.start()
    deadline = time.monotonic() + 10
    while ex.governance.caps.running_in_group("g") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    pool = ex.submit(call("p", "pool_g", seconds=0.0))
    result = pool.result(timeout=LIMIT_S)
    t.join(LIMIT_S)
    results = executors.note(ex, [*holder[0], result])
    ok(results)
    assert stamps(results[1])[0] >= stamps(results[0])[1]


def test_every_entry_point_from_several_threads_shares_one_group_and_one_rate_without_deadlock(
        executors: Executors) -> None:
    ex = executors(group_tools(), workers=3, concurrency={"g": 2})
    names = ["inline_g", "pool_g", "inline_rated", "pool_rated", "free"]
    barrier = threading.Barrier(6)

    def calls(tag: str) -> list[dict]:
        return [call(f"{tag}{i}", names[(i + len(tag)) % len(names)], seconds=0.05) for i in range(6)]

    def by_run(tag: str) -> list[ToolResult]:
        barrier.wait(10)
        return ex.run(calls(tag))

    def by_stream(tag: str) -> list[ToolResult]:
        barrier.wait(10)
        return [e.result for e in ex.stream(calls(tag)) if hasattr(e, "result")]

    def by_submit(tag: str) -> list[ToolResult]:
        barrier.wait(10)
        futures: list[Future[ToolResult]] = [ex.submit(c) for c in calls(tag)]
        return [f.result(timeout=LIMIT_S) for f in futures]

    def by_imap(tag: str) -> list[ToolResult]:
        barrier.wait(10)
        return list(ex.imap(calls(tag), window=2))

    def by_arun(tag: str) -> list[ToolResult]:
        barrier.wait(10)
        return asyncio.run(asyncio.wait_for(ex.arun(calls(tag)), LIMIT_S))

    def by_acall(tag: str) -> list[ToolResult]:
        barrier.wait(10)

        async def all_of() -> list[ToolResult]:
            return list(await asyncio.gather(*(ex.acall(c) for c in calls(tag))))

        return asyncio.run(asyncio.wait_for(all_of(), LIMIT_S))

    ways = {"run": by_run, "stream": by_stream, "submit": by_submit, "imap": by_imap, "arun": by_arun,
            "acall": by_acall}
    before = time.time()  # no token is handed out before this
    per_way = in_threads(lambda tag: ways[tag](tag), list(ways), limit=LIMIT_S)
    results = executors.note(ex, [r for rs in per_way for r in rs])
    ok(results)
    assert len(results) == 36
    group = [stamps(r) for r in results if r.name in ("inline_g", "pool_g")]
    assert group and max_overlap(group) <= 2
    for name in ("inline_rated", "pool_rated"):  # 20/s: the n-th token comes (n - 1) x 0.05 s after the first
        starts = sorted(stamps(r)[0] for r in results if r.name == name)
        assert starts[-1] - before >= (len(starts) - 1) * 0.05 - 0.005, (name, before, starts)
    assert all(text(r) for r in results)
