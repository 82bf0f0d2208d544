"""Caps, rate limits and worker recycling on the Executor, end to end in real forked workers (no mocks).

Each capped tool returns the wall-clock start and end of its call (``time.time()`` in the worker), so
the tests see from the outside how many calls of it ever ran at once and when they started. Timing
assertions are lower bounds or generous windows: CI machines are loaded."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from concurrent.futures import Future

from tests.governance.executors import MIB, Executors, call, in_threads, max_overlap, most_in_window, stamps, text
from tests.procs import all_gone
from toolfork import Limits, Tool
from toolfork.executor.types import CallFinished, CallStarted, ToolResult
from toolfork.governance.verdict import STATM_RESIDENT, statm_bytes

# ---------------------------------------------------------------- the tools (module level: forked workers have them)

def stamp(seconds: float = 0.0) -> str:
    """Sleep ``seconds``; return "start end pid" (wall clock)."""
    import os

    start = time.time()
    if seconds:
        time.sleep(seconds)
    return f"{start!r} {time.time()!r} {os.getpid()}"


def whoami() -> str:
    """The pid of the process the call ran in."""
    import os

    return str(os.getpid())


_HOARD: list[bytearray] = []


def grow(mb: int) -> str:
    """Keep ``mb`` MiB more (touched: resident) in this process, for good; return "pid rss_mb"."""
    import os

    _HOARD.append(bytearray(mb * MIB))  # zero-filled: every page touched
    return f"{os.getpid()} {statm_bytes(STATM_RESIDENT) // MIB}"


def make(name: str, fn: object = stamp, **settings: object) -> Tool:
    return Tool(name, fn=fn, **settings)  # type: ignore[arg-type]


def ok(results: list[ToolResult]) -> None:
    bad = [(r.call_id, r.status, r.error) for r in results if r.status != "ok"]
    assert not bad, bad


# ---------------------------------------------------------------- caps

def test_a_capped_tool_never_runs_more_than_its_cap_and_other_tools_are_not_held_behind_it(
        executors: Executors) -> None:
    ex = executors([make("capped", max_concurrency=2), make("free")], workers=6)
    calls = [call(f"c{i}", "capped", seconds=0.3) for i in range(20)] + \
            [call(f"f{i}", "free", seconds=0.3) for i in range(6)]
    results = executors.run(ex, calls)
    ok(results)
    capped = [stamps(r) for r in results[:20]]
    free = [stamps(r) for r in results[20:]]
    assert max_overlap(capped) == 2  # never more than its cap (and the cap is used)
    last_capped_start = max(s for s, _ in capped)
    # The free calls come after the 20 capped ones in the batch, yet none waited for the capped queue.
    assert all(s < last_capped_start for s, _ in free), (free, last_capped_start)
    assert last_capped_start - min(s for s, _ in capped) >= 2.4  # 20 calls, 2 at a time, 0.3 s each


def test_a_concurrency_group_caps_its_tools_together(executors: Executors) -> None:
    ex = executors([make("q1", concurrency_group="db"), make("q2", concurrency_group="db"), make("free")],
                   workers=8, concurrency={"db": 3})
    calls = [call(f"{name}-{i}", name, seconds=0.3) for i in range(8) for name in ("q1", "q2")]
    calls += [call(f"f{i}", "free", seconds=0.3) for i in range(4)]
    results = executors.run(ex, calls)
    ok(results)
    grouped = [stamps(r) for r in results if r.name in ("q1", "q2")]
    assert 2 <= max_overlap(grouped) <= 3
    assert max_overlap([stamps(r) for r in results if r.name == "q1"]) <= 3


def test_the_cap_is_shared_by_batches_running_at_once_from_two_threads(executors: Executors) -> None:
    ex = executors([make("capped", max_concurrency=2)], workers=6)
    barrier = threading.Barrier(2)

    def batch(tag: str) -> list[ToolResult]:
        barrier.wait(10)
        return executors.run(ex, [call(f"{tag}{i}", "capped", seconds=0.3) for i in range(6)])

    results = [r for rs in in_threads(batch, "ab") for r in rs]
    ok(results)
    assert max_overlap([stamps(r) for r in results]) <= 2


def test_submit_futures_from_several_threads_respect_the_cap(executors: Executors) -> None:
    ex = executors([make("capped", max_concurrency=2), make("free")], workers=6)
    def submit(tag: str) -> list[Future[ToolResult]]:
        return [ex.submit(call(f"{tag}{i}", "capped", seconds=0.25)) for i in range(4)]

    futures = [f for fs in in_threads(submit, "abcd", limit=30) for f in fs]
    free = ex.submit(call("free", "free"))
    results = executors.note(ex, [f.result(timeout=60) for f in futures])
    ok(results)
    assert len(results) == 16
    assert max_overlap([stamps(r) for r in results]) <= 2
    assert free.result(timeout=60).status == "ok"


def test_a_waiting_calls_timeout_counts_from_its_start(executors: Executors) -> None:
    ex = executors([make("one_at_a_time", max_concurrency=1)], workers=3, timeout=3)
    results = executors.run(ex, [call(i, "one_at_a_time", seconds=1) for i in range(5)])
    ok(results)  # the last waited about 4 s in the queue, past the 3 s timeout, and was not timed out
    starts = sorted(s for s, _ in map(stamps, results))
    assert starts[-1] - starts[0] >= 3.5
    assert max_overlap([stamps(r) for r in results]) == 1


def test_cancel_reaches_calls_waiting_for_their_cap(executors: Executors) -> None:
    ex = executors([make("slow", max_concurrency=1), make("free")], workers=3)
    batch = ex.stream([call(i, "slow", seconds=10) for i in range(6)])
    finished: dict[str, ToolResult] = {}
    cancelled_at = None
    for event in batch:
        if type(event) is CallStarted and cancelled_at is None:
            time.sleep(0.2)
            cancelled_at = time.monotonic()
            batch.cancel()
        elif type(event) is CallFinished:
            finished[event.call_id] = event.result
    done_at = time.monotonic()
    assert cancelled_at is not None
    assert sorted(finished) == [str(i) for i in range(6)]
    assert {r.status for r in finished.values()} == {"cancelled"}, {k: r.status for k, r in finished.items()}
    assert done_at - cancelled_at < 8  # not the minute the six calls would take
    executors.note(ex, finished.values())
    # The cancelled calls gave their slot back: the tool runs again at once.
    started = time.monotonic()
    (again,) = executors.run(ex, [call("again", "slow", seconds=0)])
    assert again.status == "ok" and time.monotonic() - started < 8


# ---------------------------------------------------------------- rate limits

def test_a_rate_limit_spreads_starts_smoothly(executors: Executors) -> None:
    ex = executors([make("rated", rate_limit="20/s"), make("free")], workers=4)
    calls = [call(i, "rated") for i in range(100)] + [call(f"f{i}", "free") for i in range(4)]
    started = time.monotonic()
    results = executors.run(ex, calls)
    ok(results)
    starts = sorted(s for s, _ in map(stamps, results[:100]))
    assert starts[-1] - starts[0] >= 4.5  # 99 intervals of 0.05 s
    assert most_in_window(starts, 0.5) <= 15  # about 10 a half second, never a burst
    assert time.monotonic() - started < 30
    free_starts = [s for s, _ in map(stamps, results[100:])]
    assert all(s < starts[-1] for s in free_starts)  # free calls are not held behind the rated queue


def test_sequential_mode_honours_the_rate_limit(executors: Executors) -> None:
    ex = executors([make("rated", rate_limit="2/s"), make("free")], mode="sequential")
    assert ex.mode == "sequential"
    results = executors.run(ex, [call(i, "rated") for i in range(4)] + [call("f", "free")])
    ok(results)
    starts = [s for s, _ in map(stamps, results[:4])]
    assert starts[-1] - starts[0] >= 1.4  # 3 intervals of 0.5 s
    # Half an interval of margin: a start the loaded machine delays brings the next one closer.
    assert all(b - a >= 0.25 for a, b in itertools.pairwise(starts)), starts


def test_sequential_mode_caps_batches_from_several_threads(executors: Executors) -> None:
    ex = executors([make("capped", max_concurrency=1)], mode="sequential")
    def batch(tag: str) -> list[ToolResult]:
        return ex.run([call(f"{tag}{i}", "capped", seconds=0.1) for i in range(3)])

    out = [r for rs in in_threads(batch, "abc", limit=30) for r in rs]
    ok(out)
    assert len(out) == 9 and max_overlap([stamps(r) for r in out]) == 1


# ---------------------------------------------------------------- worker recycling

def test_max_calls_per_worker_recycles_workers(executors: Executors) -> None:
    ex = executors([make("whoami", whoami)], workers=2, max_calls_per_worker=3)
    # Twice: the second batch sees the tool as quick (chunks of calls), which must be cut at the cap too.
    for round_ in range(2):
        results = executors.run(ex, [call(f"{round_}-{i}", "whoami") for i in range(30)])
        ok(results)
        served = Counter(int(text(r)) for r in results)
        executors.pids[id(ex)].update(served)  # checked gone after close
        assert max(served.values()) <= 3, served
        assert len(served) >= 10


def test_max_calls_per_worker_holds_on_imap(executors: Executors) -> None:
    ex = executors([make("whoami", whoami)], workers=2, max_calls_per_worker=2)
    calls = [call(i, "whoami") for i in range(24)]
    results = executors.note(ex, ex.imap(iter(calls)))
    assert [r.call_id for r in results] == [c["id"] for c in calls]
    ok(results)
    served = Counter(int(text(r)) for r in results)
    executors.pids[id(ex)].update(served)
    assert max(served.values()) <= 2, served
    assert len(served) >= 12


def test_max_worker_memory_mb_replaces_a_worker_that_grew(executors: Executors) -> None:
    probe = executors([make("grow", grow)], workers=1)
    (base,) = executors.run(probe, [call("base", "grow", mb=0)])
    base_rss = int(text(base).split()[1])
    cap = 250  # a worker's own memory (beyond what it shares with the host) is over it after three calls of 100 MB
    ex = executors([make("grow", grow)], workers=2, max_worker_memory_mb=cap)
    results = executors.run(ex, [call(i, "grow", mb=100) for i in range(12)])
    ok(results)
    pids = Counter(int(text(r).split()[0]) for r in results)
    executors.pids[id(ex)].update(pids)
    assert len(pids) > 2, pids  # replaced, not only the two it started with
    assert max(pids.values()) <= 3, pids
    # No worker ran a call once it was over the cap.
    assert all(int(text(r).split()[1]) <= base_rss + cap + 100 + 50 for r in results), [text(r) for r in results]


def test_recycling_with_limits_and_caps_leaves_no_process_behind(executors: Executors) -> None:
    tools = [make("capped", max_concurrency=2), make("whoami", whoami, limits=Limits(memory_mb=256)),
             make("offline", whoami, limits=Limits(network=False)), make("rated", rate_limit="50/s")]
    ex = executors(tools, workers=3, max_calls_per_worker=4)
    seen: set[int] = set()
    for round_ in range(2):
        calls = [call(f"{round_}c{i}", "capped", seconds=0.05) for i in range(6)]
        calls += [call(f"{round_}w{i}", "whoami") for i in range(6)]
        calls += [call(f"{round_}o{i}", "offline") for i in range(2)]
        calls += [call(f"{round_}r{i}", "rated") for i in range(6)]
        results = executors.run(ex, calls)
        ok(results)
        seen.update(r.worker_pid for r in results if r.worker_pid)
    seen.update(ex.backend.worker_pids)  # type: ignore[attr-defined]
    template = ex.backend.template_pid  # type: ignore[attr-defined]
    assert template is not None
    left = executors.close(ex)
    assert not left
    assert not all_gone(sorted(seen | {template}), 10.0)


def test_every_result_names_the_worker_it_ran_in(executors: Executors) -> None:
    """``ToolResult.worker_pid`` is the pid of the process that ran the call, also for a call that ran
    in a worker the pool had just forked (recycling forks one every call here)."""
    ex = executors([make("whoami", whoami)], workers=2, max_calls_per_worker=1)
    results = executors.run(ex, [call(i, "whoami") for i in range(40)])
    ok(results)
    executors.pids[id(ex)].update(int(text(r)) for r in results)
    wrong = [(r.call_id, r.worker_pid, text(r)) for r in results if r.worker_pid != int(text(r))]
    assert not wrong, wrong


def test_cancelling_the_future_of_a_call_waiting_for_its_cap_ends_it_and_spares_the_others(
        executors: Executors) -> None:
    ex = executors([make("slow", max_concurrency=1)], workers=3)
    first = ex.submit(call("first", "slow", seconds=1.5))
    waiting = ex.submit(call("waiting", "slow", seconds=1.5))
    last = ex.submit(call("last", "slow", seconds=0.1))
    time.sleep(0.3)  # "first" runs, the other two wait for the slot
    cancelled_at = time.monotonic()
    ex.cancel(waiting)  # handed to the backend (running, as a Future): Executor.cancel stops it
    results = executors.note(ex, [first.result(timeout=60), last.result(timeout=60)])
    ok(results)
    assert waiting.cancelled() or waiting.result(timeout=10).status == "cancelled"
    # "last" did not wait for the cancelled call's 1.5 s: it started once "first" was done.
    first_end = stamps(results[0])[1]
    last_start = stamps(results[1])[0]
    assert last_start >= first_end
    assert last_start - first_end < 1.4, (last_start - first_end)
    assert time.monotonic() - cancelled_at < 30


def test_imap_keeps_call_order_with_a_capped_tool_and_a_small_window(executors: Executors) -> None:
    ex = executors([make("capped", max_concurrency=1), make("free")], workers=3)
    calls = [call(i, "capped" if i % 3 == 0 else "free", seconds=0.05) for i in range(30)]
    results = executors.note(ex, ex.imap(iter(calls), window=4))
    assert [r.call_id for r in results] == [c["id"] for c in calls]
    ok(results)
    assert max_overlap([stamps(r) for r in results if r.name == "capped"]) == 1
