"""``Executor.stats()``: a snapshot of workers, queue, calls and restarts, right in every mode and under attack
(calls that crash while another thread reads, restarts that could be counted twice, batches from many
threads at once)."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.observability.metrics_tools import TOOLS
from toolfork.executor import Executor, ToolCall
from toolfork.executor.stats import ExecutorStats


def call(i: int | str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=f"c{i}", name=name, arguments=arguments)


def eventually(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold within the time allowed")
        time.sleep(0.02)


def test_fork_counts_every_outcome_by_tool_and_status_and_each_restart_once() -> None:
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        results = ex.run([call(1, "add", a=1, b=2), call(2, "fail"), call(3, "die"), call(4, "nope"),
                          ToolCall(id="c5", name="hang", arguments={}, timeout=0.3), call(6, "add", a=2, b=2)])
        assert [r.status for r in results] == ["ok", "error", "crashed", "error", "timeout", "ok"]
        time.sleep(1.0)  # the template's reports of the two deaths arrive: they must not count again
        ex.run([call(7, "add", a=0, b=0)])  # a round that reads those reports
        stats = ex.stats()
    assert stats.mode == "fork" and stats.workers == 2
    assert dict(stats.calls) == {("add", "ok"): 3, ("fail", "error"): 1, ("die", "crashed"): 1,
                                 ("(unknown)", "error"): 1, ("hang", "timeout"): 1}
    assert dict(stats.restarts) == {"crash": 1, "timeout": 1}
    assert stats.template_restarts == 0
    assert stats.calls_total == 7 and stats.calls_by_status == {"ok": 3, "error": 2, "crashed": 1, "timeout": 1}


def test_busy_idle_and_queued_seen_from_another_thread_while_a_batch_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        assert (ex.stats().busy, ex.stats().idle, ex.stats().queued) == (0, 2, 0)
        done: list[object] = []
        batch = threading.Thread(target=lambda: done.append(ex.run(
            [call(i, "hold", gate=str(gate)) for i in range(5)])))
        batch.start()
        try:
            seen: list[ExecutorStats] = []

            def both_busy() -> bool:
                seen.append(ex.stats())
                return seen[-1].busy == 2

            eventually(both_busy)
            s = seen[-1]
            assert (s.busy, s.idle, s.queued) == (2, 0, 3)  # a hold call of unknown length goes alone
            assert s.calls_total == 0
        finally:
            gate.touch()
            batch.join(60)
        eventually(lambda: ex.stats().busy == 0)
        s = ex.stats()
        assert (s.busy, s.idle, s.queued, dict(s.calls)) == (0, 2, 0, {("hold", "ok"): 5})


def test_counts_are_exact_with_batches_from_many_threads_and_a_reader_hammering_stats() -> None:
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        stop = threading.Event()
        snapshots: list[int] = []
        errors: list[BaseException] = []

        def reader() -> None:
            try:
                while not stop.is_set():
                    snapshots.append(ex.stats().calls_total)
            except BaseException as exc:
                errors.append(exc)

        def batch(t: int) -> None:
            ex.run([ToolCall(id=f"t{t}-{i}", name="die" if i % 50 == 0 else "add", arguments={} if i % 50 == 0
                             else {"a": t, "b": i}) for i in range(200)])

        r = threading.Thread(target=reader)
        r.start()
        threads = [threading.Thread(target=batch, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        stop.set()
        r.join(10)
        stats = ex.stats()
    assert not errors
    assert dict(stats.calls) == {("add", "ok"): 4 * 196, ("die", "crashed"): 4 * 4}
    assert stats.restarts["crash"] == 16
    assert snapshots == sorted(snapshots)  # never went down while batches ran and ended
    assert snapshots[-1] <= 800


def test_submit_counts_and_a_cancelled_running_call_is_one_cancel_restart(tmp_path: Path) -> None:
    with Executor(TOOLS, mode="fork", workers=1) as ex:
        assert ex.submit(call(1, "add", a=1, b=1)).result(30).status == "ok"
        future = ex.submit(call(2, "hold", gate=str(tmp_path / "never")))
        eventually(lambda: ex.stats().busy == 1)
        ex.cancel(future)
        eventually(lambda: ex.stats().calls.get(("hold", "cancelled")) == 1)
        assert ex.submit(call(3, "add", a=1, b=1)).result(30).status == "ok"
        stats = ex.stats()
    assert dict(stats.calls) == {("add", "ok"): 2, ("hold", "cancelled"): 1}
    assert dict(stats.restarts) == {"cancel": 1}


def test_recycled_workers_are_counted_as_recycle() -> None:
    with Executor(TOOLS, mode="fork", workers=1, max_calls_per_worker=1) as ex:
        for i in range(3):
            assert ex.run([call(i, "add", a=i, b=i)])[0].status == "ok"
        stats = ex.stats()
    assert dict(stats.restarts) == {"recycle": 3}


def test_a_killed_template_is_one_template_restart_and_its_workers_counted_with_it() -> None:
    with Executor(TOOLS, mode="fork", workers=2) as ex:
        assert ex.run([call(1, "add", a=1, b=1)])[0].status == "ok"
        template = ex.backend.template_pid  # type: ignore[attr-defined]
        assert template is not None
        os.kill(template, signal.SIGKILL)
        eventually(lambda: ex.run([call(f"x{time.monotonic()}", "add", a=1, b=1)])[0].status == "ok"
                   and ex.stats().template_restarts == 1)
        stats = ex.stats()
    assert stats.template_restarts == 1
    assert dict(stats.restarts) == {"template": 2}


def test_a_retried_call_counts_once_with_its_last_status() -> None:
    with Executor(TOOLS, mode="fork", workers=1) as ex:
        assert ex.run([call(1, "die_thrice")])[0].status == "crashed"
        stats = ex.stats()
    assert dict(stats.calls) == {("die_thrice", "crashed"): 1}
    assert dict(stats.restarts) == {"crash": 3}  # three workers died: three attempts


def test_invented_tool_names_share_one_key() -> None:
    with Executor(TOOLS, mode="sequential") as ex:
        ex.run([call(i, f"made_up_{i}") for i in range(50)])
        assert dict(ex.stats().calls) == {("(unknown)", "error"): 50}


def test_sequential_busy_is_the_call_running_in_the_host(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with Executor(TOOLS, mode="sequential") as ex:
        s = ex.stats()
        assert (s.mode, s.workers, s.busy, s.idle, dict(s.restarts)) == ("sequential", 0, 0, 0, {})
        t = threading.Thread(target=ex.run, args=([call(1, "hold", gate=str(gate)), call(2, "fail")],))
        t.start()
        try:
            eventually(lambda: ex.stats().busy == 1)
        finally:
            gate.touch()
            t.join(30)
        s = ex.stats()
    assert (s.busy, dict(s.calls)) == (0, {("hold", "ok"): 1, ("fail", "error"): 1})


def test_a_snapshot_cannot_be_changed_and_is_not_changed_by_later_calls() -> None:
    with Executor(TOOLS, mode="sequential") as ex:
        ex.run([call(1, "add", a=1, b=1)])
        s = ex.stats()
        with pytest.raises(dataclasses.FrozenInstanceError):
            s.busy = 3  # type: ignore[misc]
        with pytest.raises(TypeError):
            s.calls[("add", "ok")] = 9  # type: ignore[index]
        ex.run([call(2, "add", a=1, b=1)])
    assert dict(s.calls) == {("add", "ok"): 1}
    assert dict(ex.stats().calls) == {("add", "ok"): 2}  # a closed executor still answers
