"""The executor contract (design.md, points 1, 2, 6, 8), checked against every backend."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from toolfork.executor import CallFinished, CallProgress, CallStarted, ToolCall
from toolfork.tools import ToolRuntime, tool


def test_results_come_back_in_call_order_whatever_finished_first(make_executor, mode, tmp_path):
    ex = make_executor(mode=mode, workers=3)
    calls = [ToolCall(f"c{i}", "sleep_for", {"seconds": s, "value": f"v{i}"})
             for i, s in enumerate([0.3, 0.0, 0.15])]
    results = ex.run(calls)
    assert [r.call_id for r in results] == ["c0", "c1", "c2"]
    assert [r.output.as_text() for r in results] == ["v0", "v1", "v2"]
    assert all(r.status == "ok" and r.error is None for r in results)
    if mode != "sequential":
        # Completion order in the stream, made certain with gates: c0 waits for c2, c2 for c1.
        gate_c1, gate_c2 = tmp_path / "c1-done", tmp_path / "c2-done"
        gated = [ToolCall("c0", "wait_for_file", {"path": str(gate_c2)}),
                 ToolCall("c1", "add", {"a": 1, "b": 1}),
                 ToolCall("c2", "wait_for_file", {"path": str(gate_c1)})]
        finished = []
        for event in ex.stream(gated):
            if isinstance(event, CallFinished):
                finished.append(event.call_id)
                {"c1": gate_c1, "c2": gate_c2}.get(event.call_id, tmp_path / "x").touch()
        assert finished == ["c1", "c2", "c0"]
        assert ex.run(gated)[0].output.data is True  # and run() still returns them in call order


def test_a_failing_tool_fails_its_call_only(make_executor, mode):
    ex = make_executor(mode=mode)
    results = ex.run([
        ToolCall("a", "add", {"a": 2, "b": 3}),
        ToolCall("b", "fail", {"message": "boom at step 3"}),
        ToolCall("c", "add", {"a": "not a number", "b": 1}),
        ToolCall("d", "no_such_tool", {}),
        ToolCall("e", "add", {"a": 1, "b": 1}),
    ])
    assert [r.status for r in results] == ["ok", "error", "error", "error", "ok"]
    assert results[0].output.data == 5 and results[4].output.data == 2
    assert results[1].error.type == "ValueError"
    assert "boom at step 3" in results[1].error.message
    assert "Traceback" in results[1].error.traceback and "fail" in results[1].error.traceback
    assert results[2].error.type == "ToolInputError" and "a:" in results[2].error.message
    assert "no_such_tool" in results[3].error.message and "add" in results[3].error.message


def test_misuse_raises(make_executor, mode):
    ex = make_executor(mode=mode)
    with pytest.raises(ValueError, match="duplicate call id 'x'"):
        ex.run([ToolCall("x", "add", {"a": 1, "b": 2}), ToolCall("x", "add", {"a": 1, "b": 2})])
    ex.close()
    with pytest.raises(RuntimeError, match="closed"):
        ex.run([ToolCall("y", "add", {"a": 1, "b": 2})])


def test_dict_calls_are_accepted(make_executor, mode):
    ex = make_executor(mode=mode)
    [r] = ex.run([{"id": "d1", "name": "add", "arguments": {"a": 40, "b": 2}}])
    assert r.output.data == 42
    with pytest.raises(ValueError, match="'id', 'name'"):
        ex.run([{"name": "add"}])


def test_empty_batch(make_executor, mode):
    assert make_executor(mode=mode).run([]) == []


def test_timeout_precedence_call_over_tool_over_executor(make_executor, mode):
    from tests.executor import tools_for_tests as T
    from toolfork.tools import tool

    @tool(timeout=0.2)
    def tool_limited(seconds: float) -> str:
        """Sleeps; the tool's own timeout is 0.2 s."""
        import time

        time.sleep(seconds)
        return "done"

    ex = make_executor([T.sleep_for, tool_limited], mode=mode, timeout=5.0)
    results = ex.run([
        ToolCall("call-wins", "tool_limited", {"seconds": 0.4}, timeout=1.0),  # 0.4 < 1.0: ok
        ToolCall("tool-wins", "tool_limited", {"seconds": 0.6}),                 # 0.6 > 0.2: timeout
        ToolCall("executor", "sleep_for", {"seconds": 0.1}),                     # 0.1 < 5: ok
    ])
    assert [r.status for r in results] == ["ok", "timeout", "ok"]
    assert "0.2" in results[1].error.message


def test_progress_and_context(make_executor, mode):
    ex = make_executor(mode=mode)
    events = list(ex.stream([ToolCall("p", "progress", {"steps": 3, "pause": 0.05})]))
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "CallStarted" and kinds[-1] == "CallFinished"
    assert [e.value for e in events if isinstance(e, CallProgress)] == [{"step": 0}, {"step": 1}, {"step": 2}]
    # context: merged in call order, the last call wins although it finished first
    ex.run([ToolCall("first", "set_ctx", {"key": "k", "value": 1, "delay": 0.0}),
            ToolCall("second", "set_ctx", {"key": "k", "value": 2, "delay": 0.0}),
            ToolCall("third", "set_ctx", {"key": "other", "value": 3, "delay": 0.0})])
    assert ex.context == {"k": 2, "other": 3}


def test_started_events_precede_finished(make_executor, mode):
    ex = make_executor(mode=mode)
    events = list(ex.stream([ToolCall(str(i), "add", {"a": i, "b": i}) for i in range(5)]))
    for i in range(5):
        started = next(n for n, e in enumerate(events) if isinstance(e, CallStarted) and e.call_id == str(i))
        finished = next(n for n, e in enumerate(events) if isinstance(e, CallFinished) and e.call_id == str(i))
        assert started < finished


def test_unserializable_result_is_an_error_not_a_hang(make_executor, mode):
    ex = make_executor(mode=mode)
    [r, ok] = ex.run([ToolCall("u", "unpicklable", {}), ToolCall("v", "add", {"a": 1, "b": 1})])
    if mode == "sequential":  # nothing crosses a process boundary: the lock comes back as is
        assert r.status == "ok"
    else:
        assert r.status == "error" and "serialized" in r.error.message and "unpicklable" in r.error.message
    assert ok.status == "ok"


def test_inline_tool_runs_in_the_host(make_executor, mode):
    from toolfork.tools import tool

    state: list[int] = []

    @tool(inline=True)
    def remember(x: int) -> int:
        """Mutates host state."""
        state.append(x)
        return os.getpid()

    ex = make_executor([remember], mode=mode)
    [r] = ex.run([ToolCall("i", "remember", {"x": 7})])
    assert r.output.data == os.getpid() and state == [7]


def test_arun(make_executor, mode):
    ex = make_executor(mode=mode)
    results = asyncio.run(ex.arun([ToolCall("a", "add", {"a": 1, "b": 2})]))
    assert results[0].output.data == 3


def test_imap_keeps_order_and_bounds_the_window(make_executor, mode):
    ex = make_executor(mode=mode)
    pulled = []

    def calls():
        for i in range(50):
            pulled.append(i)
            yield ToolCall(f"m{i}", "add", {"a": i, "b": 0})

    got = []
    for r in ex.imap(calls(), window=5):
        got.append(r.output.data)
        assert len(pulled) - len(got) <= 5  # never more than the window ahead of the consumer
    assert got == list(range(50))


def test_cancel_from_another_thread_stops_the_batch(make_executor, mode):
    import threading

    ex = make_executor(mode=mode, workers=2)
    calls = [ToolCall("quick", "add", {"a": 1, "b": 1}),
             ToolCall("slow1", "sleep_for", {"seconds": 3.0}),
             ToolCall("slow2", "sleep_for", {"seconds": 3.0}),
             *[ToolCall(f"later{i}", "sleep_for", {"seconds": 3.0}) for i in range(4)]]
    started = threading.Event()

    def canceller():
        started.wait(5)
        ex.cancel()

    t = threading.Thread(target=canceller)
    t.start()
    results = []
    for event in ex.stream(calls):
        if (isinstance(event, CallStarted) and event.call_id == "slow2") or mode == "sequential":
            started.set()
        if isinstance(event, CallFinished):
            results.append(event.result)
    t.join()
    by_id = {r.call_id: r for r in results}
    assert set(by_id) == {c.id for c in calls}  # still one result per call
    assert by_id["quick"].status == "ok"
    assert all(by_id[f"later{i}"].status == "cancelled" for i in range(4))
    assert "cancelled" in by_id["later3"].error.message
    if mode != "sequential":
        assert by_id["slow1"].status == by_id["slow2"].status == "cancelled"
    ex.cancel()  # no batch running: nothing happens
    assert ex.run([ToolCall("after", "add", {"a": 2, "b": 2})])[0].output.data == 4


def test_imap_window_of_one_with_unknown_and_inline_tools(make_executor, mode):
    from toolfork.tools import tool

    @tool(inline=True)
    def here(x: int) -> int:
        """Inline."""
        return x

    from tests.executor import tools_for_tests as T

    ex = make_executor([here, *T.ALL], mode=mode)
    calls = [ToolCall("u", "nope", {}), ToolCall("i", "here", {"x": 3}), ToolCall("a", "add", {"a": 1, "b": 1})]
    results = list(ex.imap(calls, window=1))
    assert [r.call_id for r in results] == ["u", "i", "a"]
    assert [r.status for r in results] == ["error", "ok", "ok"]


def test_astream_hands_events_to_the_event_loop_as_they_happen(make_executor, mode, tmp_path):
    """The slow call can only finish once the test, consuming astream, has seen the quick one finish."""
    gate = tmp_path / "quick-finished"
    if mode == "sequential":
        gate.touch()  # one call at a time: the slow call runs first and must not wait
    ex = make_executor(mode=mode, workers=2)
    calls = [ToolCall("slow", "wait_for_file", {"path": str(gate)}), ToolCall("quick", "add", {"a": 1, "b": 2})]

    async def consume():
        finished = []
        ticks = 0

        async def ticker():  # the event loop stays free while the batch runs in its thread
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        async for event in ex.astream(calls):
            if isinstance(event, CallFinished):
                finished.append(event.result)
                if event.call_id == "quick":
                    gate.touch()
        t.cancel()
        return finished, ticks

    finished, ticks = asyncio.run(consume())
    assert {r.call_id: r.output.data for r in finished} == {"slow": True, "quick": 3}
    assert ticks >= 1
    if mode != "sequential":
        assert [r.call_id for r in finished] == ["quick", "slow"]


@tool
def chatter_forever(runtime: ToolRuntime) -> str:
    """Report progress every 20 ms and never finish."""
    while True:
        runtime.emit_progress("still working")
        time.sleep(0.02)


def test_progress_does_not_push_the_deadline_back(make_executor, mode):
    ex = make_executor([chatter_forever], mode=mode)
    events = list(ex.stream([ToolCall("c", "chatter_forever", {}, timeout=0.5)]))
    assert type(events[-1]).__name__ == "CallFinished" and events[-1].result.status == "timeout"
    assert sum(type(e).__name__ == "CallProgress" for e in events) > 3  # it did report while running
