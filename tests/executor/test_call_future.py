"""``CallFuture``: a submitted call's future makes its ``Condition`` only when something needs one, and is
still a ``concurrent.futures.Future`` in every way a host uses one: ``result`` (with and without a
timeout, before and after the result is there), ``wait``, ``as_completed``, callbacks, ``asyncio``.

The hand-driven batch of test_singles_parking.py resolves each call when the test says, so each order
(waiting first, resolving first) is taken on purpose; the last tests race real pools' results against
waiters in other threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.executor.test_singles_parking import BOUND_S, HandDriven
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.executor.singles import CallFuture, Singles, SinglesHost
from toolfork.tools import tool


@pytest.fixture
def driven() -> Iterator[tuple[HandDriven, Singles]]:
    hand = HandDriven()
    singles = Singles(SinglesHost(run=hand.run, stop=lambda feed: None, merge_context=lambda u: None,
                                  closed=lambda: False))
    try:
        yield hand, singles
    finally:
        singles.close()
        hand.commands.put(("end", None))
        singles.join()


def _submitted(hand: HandDriven, singles: Singles, call_id: str) -> CallFuture:
    future = singles.submit(ToolCall(call_id, "t", {}))
    assert [c.id for c in hand.step("pull")] == [call_id]
    return future


def _waiting(thread: threading.Thread, future: CallFuture) -> None:
    """Until ``thread`` waits on ``future`` (it made the Condition and has not returned)."""
    end = time.monotonic() + BOUND_S
    while (future._cond is None or not future._cond._waiters) and thread.is_alive():  # type: ignore[attr-defined]
        assert time.monotonic() < end, "the waiter never started to wait"
        time.sleep(0.001)


def test_futures_internals_are_the_ones_call_future_sets() -> None:
    """``CallFuture.__init__`` sets what ``Future.__init__`` would, but for the Condition: a Python whose
    Future keeps other attributes fails here rather than in a host's ``wait``."""
    assert set(vars(concurrent.futures.Future())) == {"_condition", "_state", "_result", "_exception", "_waiters",
                                                      "_done_callbacks"}


def test_a_future_resolved_before_anyone_waits_never_makes_a_condition(driven: tuple[HandDriven, Singles]) -> None:
    hand, singles = driven
    future = _submitted(hand, singles, "a")
    assert not future.done() and not future.cancelled() and future._cond is None
    hand.step("finish", future.sent)
    assert future.done() and not future.cancelled()
    assert future.result().status == "ok" and future.result(timeout=0).call_id == "a"
    assert future._cond is None, "reading a finished future made its Condition"
    with pytest.raises(concurrent.futures.InvalidStateError):  # resolved once, as a Future is
        future.set_result(future.result())


def test_a_thread_waiting_before_the_result_is_woken_by_it(driven: tuple[HandDriven, Singles]) -> None:
    hand, singles = driven
    future = _submitted(hand, singles, "b")
    got: list[ToolResult] = []
    waiter = threading.Thread(target=lambda: got.append(future.result(timeout=BOUND_S)))
    waiter.start()
    _waiting(waiter, future)
    hand.step("finish", future.sent)
    waiter.join(BOUND_S)
    assert [r.call_id for r in got] == ["b"]


def test_a_result_not_there_by_the_timeout_raises_timeout_error(driven: tuple[HandDriven, Singles]) -> None:
    hand, singles = driven
    future = _submitted(hand, singles, "c")
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(timeout=0.05)
    with pytest.raises(concurrent.futures.TimeoutError):
        future.exception(timeout=0.05)
    hand.step("finish", future.sent)
    assert future.exception(timeout=0) is None and future.result(timeout=0).status == "ok"


def test_wait_and_as_completed_see_results_that_came_before_and_after_they_began(
        driven: tuple[HandDriven, Singles]) -> None:
    hand, singles = driven
    early = _submitted(hand, singles, "early")
    late = _submitted(hand, singles, "late")
    hand.step("finish", early.sent)  # before wait() is called: no Condition yet
    done, pending = concurrent.futures.wait([early, late], timeout=0)
    assert done == {early} and pending == {late}
    order: list[str] = []

    def collect() -> None:
        for f in concurrent.futures.as_completed([early, late], timeout=BOUND_S):
            order.append(f.result().call_id)

    waiter = threading.Thread(target=collect)
    waiter.start()
    _waiting_on_list(late)
    hand.step("finish", late.sent)
    waiter.join(BOUND_S)
    assert order == ["early", "late"]


def _waiting_on_list(future: CallFuture) -> None:
    """Until ``as_completed`` has put its waiter on ``future``."""
    end = time.monotonic() + BOUND_S
    while not future._waiters:
        assert time.monotonic() < end, "as_completed never waited on the future"
        time.sleep(0.001)


def test_callbacks_run_once_whether_added_before_or_after_the_result(driven: tuple[HandDriven, Singles]) -> None:
    hand, singles = driven
    before = _submitted(hand, singles, "before")
    seen: list[str] = []
    before.add_done_callback(lambda f: seen.append(f"before:{f.result().call_id}"))
    hand.step("finish", before.sent)
    after = _submitted(hand, singles, "after")
    hand.step("finish", after.sent)
    after.add_done_callback(lambda f: seen.append(f"after:{f.result().call_id}"))
    assert seen == ["before:before", "after:after"]


def test_a_cancelled_future_stays_cancelled_and_refuses_a_result(driven: tuple[HandDriven, Singles]) -> None:
    hand, singles = driven
    future = singles.submit(ToolCall("x", "t", {}))  # queued, not yet handed to the backend
    assert future.cancel() and future.cancelled() and future.done()
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(timeout=0)
    with pytest.raises(concurrent.futures.InvalidStateError):
        future.set_result(future.sent)  # type: ignore[arg-type]
    assert hand.step("pull") == []  # skipped: never reaches the backend
    assert future.cancelled()


def test_a_running_future_is_not_cancelled_but_stopped(driven: tuple[HandDriven, Singles]) -> None:
    hand, singles = driven
    future = _submitted(hand, singles, "r")
    assert not future.running()  # in the backend, waiting for a worker: still cancellable
    hand.step("start", future.sent)
    assert future.running() and not future.cancel() and not future.cancelled()  # as a Future's cancel()
    future.stop()  # Executor.cancel(future): the backend stops the call; its result still comes back
    hand.step("finish", future.sent)
    assert future.done() and not future.cancelled() and future.result(timeout=BOUND_S).call_id == "r"


def echo(n: int) -> int:
    """Gives ``n`` back."""
    return n


def _n(result: ToolResult) -> int:
    assert result.status == "ok" and result.output is not None, result
    return int(result.output.data)


def _race_one_round(ex: Executor, rnd: int, n: int = 400) -> None:
    futures = [ex.submit(ToolCall(f"r{rnd}-{i}", "echo", {"n": i})) for i in range(n)]
    by_result: list[int] = []
    by_as_completed: list[int] = []
    errors: list[BaseException] = []

    def wait_each(chunk: list[CallFuture]) -> None:
        try:
            by_result.extend(_n(f.result(timeout=BOUND_S)) for f in chunk)
        except BaseException as exc:  # reported below
            errors.append(exc)

    def wait_any() -> None:
        try:
            by_as_completed.extend(_n(f.result()) for f in concurrent.futures.as_completed(futures, timeout=BOUND_S))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=wait_each, args=(futures[i::4],)) for i in range(4)]
    threads.append(threading.Thread(target=wait_any))
    for t in threads:
        t.start()
    done, pending = concurrent.futures.wait(futures, timeout=BOUND_S)
    for t in threads:
        t.join(BOUND_S)
    assert not errors, errors
    assert not pending and len(done) == n
    assert sorted(by_result) == list(range(n)) == sorted(by_as_completed)


def test_racing_waiters_and_results_on_a_real_pool_lose_nothing() -> None:
    """Threads wait with ``result``, ``wait`` and ``as_completed`` while the owner thread resolves the
    same futures: every waiter gets every result, none waits until its timeout."""
    ex = Executor([tool(echo)], workers=2)
    try:
        for rnd in range(5):
            _race_one_round(ex, rnd)
    finally:
        ex.close()


def test_acall_awaits_the_same_futures_from_asyncio() -> None:
    ex = Executor([tool(echo)], workers=2)

    async def main() -> list[int]:
        return [_n(r) for r in await asyncio.gather(*(ex.acall(ToolCall(f"a{i}", "echo", {"n": i}))
                                                          for i in range(50)))]

    try:
        assert asyncio.run(main()) == list(range(50))
    finally:
        ex.close()


# ----------------------------------------------------------------- as concurrent.futures' own futures, for real


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_cancelled_futures_are_counted_done_by_wait_and_as_completed(mode: str) -> None:
    from tests.executor.tools_for_tests import sleep_for

    with Executor([sleep_for], mode=mode, workers=1) as ex:
        first = ex.submit(ToolCall("first", "sleep_for", {"seconds": 2.0, "value": "first"}))
        queued = [ex.submit(ToolCall(f"q{i}", "sleep_for", {"seconds": 2.0})) for i in range(6)]
        end = time.monotonic() + BOUND_S
        while not first.running():
            assert time.monotonic() < end, "the first call never started"
            time.sleep(0.01)
        assert [f.cancel() for f in queued] == [True] * 6
        done, not_done = concurrent.futures.wait(queued, timeout=BOUND_S)
        assert done == set(queued) and not not_done and all(f.cancelled() for f in done)
        assert set(concurrent.futures.as_completed(queued, timeout=BOUND_S)) == set(queued)
        assert not first.cancel() and first.result(timeout=BOUND_S).status == "ok"  # running: left to finish


def test_a_finished_future_is_not_kept_alive_by_the_executor() -> None:
    import gc
    import weakref

    with Executor([tool(echo)], mode="fork", workers=1) as ex:
        future = ex.submit(ToolCall("only", "echo", {"n": 7}))
        assert _n(future.result(timeout=BOUND_S)) == 7
        gone = weakref.ref(future)  # (a ToolResult has no weak references: the future holds it)
        del future
        end = time.monotonic() + BOUND_S
        while gone() is not None:  # nothing else is submitted meanwhile
            assert time.monotonic() < end, gc.get_referrers(gone())
            gc.collect()
            time.sleep(0.01)


def test_a_blocked_callback_holds_back_no_other_callers_result() -> None:
    with Executor([tool(echo)], mode="fork", workers=2) as ex:
        release = threading.Event()
        blocked_in = threading.Event()
        slow = ex.submit(ToolCall("slow", "echo", {"n": 1}))
        slow.add_done_callback(lambda f: (blocked_in.set(), release.wait(BOUND_S)))
        try:
            assert blocked_in.wait(BOUND_S), "the callback never ran"
            # Another caller's future: its result, its waiter and its own callback all come while the
            # first callback still blocks.
            other = ex.submit(ToolCall("other", "echo", {"n": 2}))
            called: list[int] = []
            other.add_done_callback(lambda f: called.append(_n(f.result())))
            assert _n(other.result(timeout=BOUND_S)) == 2
            end = time.monotonic() + BOUND_S
            while not called:
                assert time.monotonic() < end, "the other caller's callback waited for the blocked one"
                time.sleep(0.01)
            assert called == [2] and not release.is_set()
        finally:
            release.set()


def test_a_callback_that_submits_and_waits_is_answered() -> None:
    with Executor([tool(echo)], mode="fork", workers=1) as ex:
        answered: list[int] = []
        done = threading.Event()

        def callback(f: concurrent.futures.Future[ToolResult]) -> None:
            answered.append(_n(ex.submit(ToolCall("inner", "echo", {"n": _n(f.result()) + 1})).result(BOUND_S)))
            done.set()

        ex.submit(ToolCall("outer", "echo", {"n": 1})).add_done_callback(callback)
        assert done.wait(BOUND_S), "the callback's own call was never answered"
        assert answered == [2]


def test_cancel_returns_false_on_a_running_call_and_the_executor_stops_it(tmp_path: Path) -> None:
    from tests.executor.tools_for_tests import hang

    with Executor([hang], mode="fork", workers=1, kill_grace=10.0) as ex:
        started, marker = tmp_path / "started", tmp_path / "finally"
        future = ex.submit(ToolCall("h", "hang", {"marker": str(marker), "started": str(started)}))
        end = time.monotonic() + BOUND_S
        while not started.exists():
            assert time.monotonic() < end, "the call never started"
            time.sleep(0.01)
        assert future.running() and not future.cancel() and not future.cancelled()
        ex.cancel(future)
        assert future.result(timeout=BOUND_S).status == "cancelled"
        end = time.monotonic() + BOUND_S  # stopped in its worker as on a timeout: its finally runs there
        while not marker.exists():
            assert time.monotonic() < end, "the running call was not stopped"
            time.sleep(0.02)
        assert marker.read_text() == "finally ran"
