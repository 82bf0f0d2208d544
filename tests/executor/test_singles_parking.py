"""``Singles``' rule for reused ids, step by step: a call whose id belongs to a stopped call still in the
backend waits (parked) until that call's result is back. Here a hand-driven batch stands in for the
executor (``SinglesHost.run``), so each step happens in a chosen order: the orders the real pool reaches
only now and then on a loaded machine."""

from __future__ import annotations

import queue
from collections.abc import Iterable, Iterator
from typing import Any

from toolfork.executor.backends.dispatch import WAIT, Wait
from toolfork.executor.singles import Singles, SinglesHost
from toolfork.executor.types import CallFinished, CallStarted, Event, ToolCall, ToolResult

BOUND_S = 30.0


class _Feed:
    def stop(self, call: ToolCall) -> None:
        pass


class HandDriven:
    """The batch behind ``Singles``, driven by the test: ``pull()`` takes what the source gives until it
    waits; ``start(call)`` says that call reached a worker; ``finish(call)`` sends its result back."""

    def __init__(self) -> None:
        self.commands: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.done: queue.Queue[list[ToolCall]] = queue.Queue()

    def run(self, source: Iterable[ToolCall | Wait], wakeup_fd: int, on_feed: Any, parent_of: Any) -> Iterator[Event]:
        on_feed(_Feed())
        it = iter(source)
        while True:
            what, arg = self.commands.get(timeout=BOUND_S)
            if what == "end":
                return
            if what == "pull":
                pulled: list[ToolCall] = []
                for item in it:
                    if item is WAIT:
                        break
                    assert isinstance(item, ToolCall)
                    pulled.append(item)
                self.done.put(pulled)
            elif what == "start":  # the call reached a worker
                yield CallStarted(arg.id, arg.name)
                self.done.put([])
            else:  # finish
                yield CallFinished(arg.id, ToolResult(arg.id, arg.name, "ok"))
                self.done.put([])

    def step(self, what: str, arg: Any = None) -> list[ToolCall]:
        self.commands.put((what, arg))
        return self.done.get(timeout=BOUND_S)


def test_a_call_behind_a_cancelled_waiting_call_of_its_id_is_released() -> None:
    driven = HandDriven()
    singles = Singles(SinglesHost(run=driven.run, stop=lambda feed: None, merge_context=lambda u: None,
                                  closed=lambda: False))
    try:
        first = singles.submit(ToolCall("same", "t", {}))
        assert [c.arguments for c in driven.step("pull")] == [{}]  # in the backend
        driven.step("start", first.sent)
        assert not first.cancel()  # running: a Future's cancel() says False
        first.stop()  # stopped (Executor.cancel): still in the backend until its result is back
        waiting = singles.submit(ToolCall("same", "t", {"n": 1}))
        assert driven.step("pull") == []  # parked behind the first
        assert waiting.cancel()  # cancelled while it waits
        last = singles.submit(ToolCall("same", "t", {"n": 2}))
        assert driven.step("pull") == []  # parked behind the cancelled one
        driven.step("finish", first.sent)  # the first call leaves the backend
        pulled = driven.step("pull")
        assert [c.arguments for c in pulled] == [{"n": 2}], "the call behind the cancelled one was not released"
        driven.step("finish", pulled[0])
        assert last.result(timeout=BOUND_S).status == "ok"
    finally:
        singles.close()
        driven.commands.put(("end", None))
        singles.join()
