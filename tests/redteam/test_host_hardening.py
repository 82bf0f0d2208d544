"""Red team, the host side of the executor: a future gets its own call's result whatever ids come back,
deadlines hold while the batch owners are busy elsewhere (a consumer that blocks, a slow progress
listener, ``add_tools`` during a hang), the pool keeps its size when a lender dies, and cancels race
completions from many threads without a result going astray."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.executor import tools_for_tests as T
from toolfork.executor import Executor, ToolCall
from toolfork.tools import tool

BOUND_S = 30.0  # every wait in this file ends: a failure, never a hang


def _text(result: Any) -> str | None:
    return None if result.output is None else result.output.as_text()


def _wait_for(path: Path, limit: float = BOUND_S) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if path.exists():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def executors() -> Iterator[list[Executor]]:
    made: list[Executor] = []
    yield made
    for ex in made:
        ex.close()


def _make(made: list[Executor], tools: Any = None, **kwargs: Any) -> Executor:
    kwargs.setdefault("workers", 2)
    ex = Executor(T.ALL if tools is None else tools, **kwargs)
    made.append(ex)
    return ex


# ------------------------------------------------------------------ a future gets its own result


def test_a_new_call_with_a_cancelled_running_calls_id_gets_its_own_result(tmp_path: Path,
                                                                          executors: list[Executor]) -> None:
    # The grace is long: on a loaded machine the worker may not run its SIGTERM handler (and so the
    # tool's finally) within a second, and SIGKILL would then leave no mark although it was stopped.
    ex = _make(executors, mode="fork", kill_grace=10.0)
    for round_ in range(5):
        started = tmp_path / f"started-{round_}"
        old = ex.submit(ToolCall("same", "hang", {"marker": str(tmp_path / f"m-{round_}"), "started": str(started)}))
        assert _wait_for(started), "the first call never started"
        assert not old.cancel()  # running: a Future's cancel() says False; Executor.cancel stops it
        ex.cancel(old)
        new = ex.submit(ToolCall("same", "add", {"a": round_, "b": 1}))
        result = new.result(timeout=BOUND_S)
        assert result.status == "ok", result
        assert result.output is not None and result.output.data == round_ + 1
        assert old.result(timeout=BOUND_S).status == "cancelled"
        assert _wait_for(tmp_path / f"m-{round_}"), "the cancelled call was not stopped"


def test_sequential_a_reused_id_waits_for_the_cancelled_call_and_gets_its_own_result(
        executors: list[Executor]) -> None:
    ex = _make(executors, mode="sequential")
    old = ex.submit(ToolCall("same", "sleep_for", {"seconds": 1.0, "value": "old"}))
    time.sleep(0.3)  # it is running in the submit thread (nothing can stop it there)
    ex.cancel(old)
    new = ex.submit(ToolCall("same", "sleep_for", {"seconds": 0.0, "value": "new"}))
    result = new.result(timeout=BOUND_S)
    assert result.status == "ok" and _text(result) == "new", result


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_submit_reaches_a_tool_added_after_submit_was_first_used(mode: str, executors: list[Executor]) -> None:
    ex = _make(executors, mode=mode)
    assert ex.submit(ToolCall("a", "add", {"a": 1, "b": 2})).result(timeout=BOUND_S).status == "ok"

    @tool
    def later(x: int) -> int:
        """Added later."""
        return x * 10

    ex.add_tools(later)
    result = ex.submit(ToolCall("b", "later", {"x": 4})).result(timeout=BOUND_S)
    assert result.status == "ok" and result.output is not None and result.output.data == 40, result


# ------------------------------------------------------------------ deadlines while owners are busy


def test_a_deadline_holds_while_the_consumer_of_the_batch_is_blocked(tmp_path: Path,
                                                                     executors: list[Executor]) -> None:
    ex = _make(executors, mode="fork")
    marker = tmp_path / "finally"
    calls = [ToolCall("quick", "add", {"a": 1, "b": 1}),
             ToolCall("stuck", "hang", {"marker": str(marker)}, timeout=1.0)]
    seen: list[tuple[str, bool]] = []
    for result in ex.imap_unordered(calls):
        if result.call_id == "quick":
            # The consumer is busy (a full stdout pipe, say) and drives nothing: the hang must still be
            # stopped at its deadline.
            seen.append(("quick", _wait_for(marker, 15.0)))
        else:
            seen.append((result.call_id, result.status == "timeout"))
    assert seen == [("quick", True), ("stuck", True)], seen


def test_a_slow_progress_listener_does_not_stop_another_calls_deadline(tmp_path: Path,
                                                                       executors: list[Executor]) -> None:
    ex = _make(executors, mode="fork")
    marker = tmp_path / "finally"
    heard: list[bool] = []

    def listener(value: Any) -> None:
        if not heard:  # blocks the submit thread until the other call was stopped (or 15 s)
            heard.append(_wait_for(marker, 15.0))

    started = tmp_path / "started"
    stuck = ex.submit(ToolCall("stuck", "hang", {"marker": str(marker), "started": str(started)}, timeout=1.0))
    assert _wait_for(started)
    talker = ex.submit(ToolCall("talk", "progress", {"steps": 1, "pause": 0.0}), on_progress=listener)
    assert talker.result(timeout=BOUND_S).status == "ok"
    assert stuck.result(timeout=BOUND_S).status == "timeout"
    assert heard == [True], "the hang ran on while a progress listener was busy"


def test_add_tools_while_a_call_hangs_keeps_its_deadline_and_returns(tmp_path: Path,
                                                                     executors: list[Executor]) -> None:
    ex = _make(executors, mode="fork", workers=1)
    marker = tmp_path / "finally"
    started = tmp_path / "started"
    stuck = ex.submit(ToolCall("stuck", "hang", {"marker": str(marker), "started": str(started)}, timeout=2.0))
    assert _wait_for(started)
    ballast = "b" * (2 << 20)  # the tool's pickle is far larger than a pipe holds

    @tool
    def heavy() -> int:
        """A tool that carries data."""
        return len(ballast)

    adder = threading.Thread(target=ex.add_tools, args=(heavy,), daemon=True)
    adder.start()
    adder.join(BOUND_S)
    assert not adder.is_alive(), "add_tools() blocked behind the hanging call"
    assert stuck.result(timeout=BOUND_S).status == "timeout"
    assert _wait_for(marker)
    result = ex.submit(ToolCall("h", "heavy", {})).result(timeout=BOUND_S)
    assert result.status == "ok" and result.output is not None and result.output.data == len(ballast), result


# ------------------------------------------------------------------ the pool keeps its size


@tool(fresh_process=True)
def fresh_wait(path: str) -> int:
    """In a fresh process, wait (up to 30 s) for ``path`` to exist."""
    end = time.monotonic() + 30
    while time.monotonic() < end and not os.path.exists(path):
        time.sleep(0.01)
    return os.getpid()


@tool
def span(path: str, seconds: float) -> str:
    """Sleep ``seconds``; append this call's (start, end) to ``path``."""
    start = time.time()
    time.sleep(seconds)
    with open(path, "a") as f:
        f.write(f"{start} {time.time()}\n")
    return "done"


def test_one_worker_stays_one_when_the_lender_of_a_fresh_process_call_dies(tmp_path: Path,
                                                                          executors: list[Executor]) -> None:
    ex = _make(executors, [*T.ALL, fresh_wait, span], mode="fork", workers=1)
    backend: Any = ex.backend
    (lender,) = backend.worker_pids
    go = tmp_path / "go"
    fresh = ex.submit(ToolCall("fresh", "fresh_wait", {"path": str(go)}))
    time.sleep(0.5)  # the one-shot worker runs in the lender's slot
    os.kill(lender, signal.SIGKILL)
    end = time.monotonic() + BOUND_S
    while psutil.pid_exists(lender) and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(1.0)  # the host hears of the death while the one-shot still runs
    go.touch()
    assert fresh.result(timeout=BOUND_S).status == "ok"
    assert len(backend.worker_pids) == 1, backend.worker_pids
    spans = tmp_path / "spans"
    results = ex.run([ToolCall(f"s{i}", "span", {"path": str(spans), "seconds": 1.0}) for i in range(2)])
    assert [r.status for r in results] == ["ok", "ok"]
    (_, a_end), (b_start, _) = sorted(tuple(map(float, ln.split())) for ln in spans.read_text().splitlines())
    assert a_end <= b_start, "two calls ran at once on a pool of one worker"


# ------------------------------------------------------------------ cancels racing completions


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_cancels_racing_completions_across_threads_never_misroute_a_result(mode: str,
                                                                            executors: list[Executor]) -> None:
    race_cancels_and_completions(_make(executors, mode=mode, workers=3))


def race_cancels_and_completions(ex: Executor, submitters: int = 4, calls: int = 40, batchers: int = 2,
                                 batches: int = 8) -> None:
    """Many threads submit calls that reuse a few ids and cancel them at random moments, while
    batches run and are cancelled beside them: every future ends, with its own call's result or
    cancelled; no result reaches another call; the executor works afterwards. (The Ray backend's
    tests run it too.)"""
    problems: list[str] = []

    def submitter(k: int) -> None:  # daemon threads: a hang fails the test, never the suite
        rng = random.Random(k)
        for i in range(calls):
            cid = f"id-{k}-{i % 3}"  # ids come back again and again
            value = f"{k}:{i}"
            future = ex.submit(ToolCall(cid, "sleep_for", {"seconds": rng.choice([0.0, 0.0, 0.01, 0.05]),
                                                           "value": value}))
            cancelled = False
            if rng.random() < 0.5:
                time.sleep(rng.choice([0.0, 0.001, 0.01]))
                cancelled = future.cancel()
            try:
                result = future.result(timeout=BOUND_S)
            except Exception as exc:  # CancelledError: what a cancelled future gives
                if not cancelled:
                    problems.append(f"{cid}: {exc!r}")
                continue
            # Not cancelled by us (or too late to be): its own call's result, which only ever succeeds.
            if result.call_id != cid or result.status != "ok" or _text(result) != value:
                problems.append(f"{cid} (value {value!r}) got {result.status} {_text(result)!r}")

    def batcher(k: int) -> None:
        rng = random.Random(100 + k)
        for i in range(batches):
            batch_calls = [ToolCall(f"b{k}-{i}-{j}", "sleep_for", {"seconds": 0.01, "value": f"b{j}"})
                           for j in range(6)]
            batch = ex.stream(batch_calls)
            if rng.random() < 0.5:
                threading.Timer(rng.choice([0.0, 0.01, 0.03]), batch.cancel).start()
            finished = {}
            for event in batch:
                result = getattr(event, "result", None)
                if result is not None:
                    finished[result.call_id] = result
            if sorted(finished) != sorted(c.id for c in batch_calls):
                problems.append(f"batch {k}-{i}: results for {sorted(finished)}")
            for c in batch_calls:
                r = finished.get(c.id)
                if r is not None and r.status == "ok" and _text(r) != c.arguments["value"]:
                    problems.append(f"batch {k}-{i}: {c.id} got {_text(r)!r}")

    threads = [threading.Thread(target=submitter, args=(k,), daemon=True) for k in range(submitters)]
    threads += [threading.Thread(target=batcher, args=(k,), daemon=True) for k in range(batchers)]
    for t in threads:
        t.start()
    end = time.monotonic() + 90  # all of them together, not each
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    assert not [t for t in threads if t.is_alive()], "a thread never finished"
    assert problems == []
    assert ex.run([ToolCall("after", "add", {"a": 2, "b": 3})])[0].output.data == 5  # type: ignore[union-attr]
