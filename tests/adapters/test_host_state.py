"""A function tool run in a worker changes the host's state it closes over, and its callable object's
attributes, as it would in the host (toolfork/adapters/host_state.py), through the Agents SDK decorator
and the shared callables path pydantic-ai's toolset uses."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.tool_context import ToolContext

from toolfork.adapters.callables import pooled_call
from toolfork.adapters.openai_agents import function_tool
from toolfork.executor import Executor


@pytest.fixture
def ex() -> Iterator[Executor]:
    with Executor([], workers=2) as executor:
        yield executor


def invoke(t: Any, args: dict[str, Any]) -> Any:
    raw = json.dumps(args)
    return asyncio.run(t.on_invoke_tool(ToolContext(None, tool_name=t.name, tool_call_id="1", tool_arguments=raw),
                                        raw))


def test_closed_over_list_dict_and_set_get_the_workers_changes(ex: Executor) -> None:
    seen: list[int] = []
    counts: dict[str, int] = {"host": 7}
    tags: set[str] = set()

    @function_tool(executor=ex, failure_error_function=None)
    def record(tag: str) -> int:
        """Record a tag."""
        seen.append(os.getpid())
        counts[tag] = counts.get(tag, 0) + 1
        tags.add(tag)
        return len(seen)

    assert invoke(record, {"tag": "a"}) == 1
    assert invoke(record, {"tag": "a"}) == 2
    assert len(seen) == 2 and os.getpid() not in seen  # it ran in workers, and the host's list has it
    assert counts == {"host": 7, "a": 2}
    assert tags == {"a"}


def test_dict_subclasses_removals_and_in_place_operators_reach_the_host(ex: Executor) -> None:
    calls: collections.defaultdict[str, int] = collections.defaultdict(int)  # count by name, the usual way
    tally: collections.Counter[str] = collections.Counter()
    order: collections.OrderedDict[str, int] = collections.OrderedDict(a=1, b=2)
    cache = {"old": 1, "keep": 2}
    pending = {"x", "y"}
    log = [1, 2, 3]

    @function_tool(executor=ex, failure_error_function=None)
    def work(name: str) -> str:
        """Change every container another way."""
        nonlocal log
        calls[name] += 1
        tally.update([name])
        order.move_to_end("a")
        cache.pop("old", None)
        taken = pending.pop()  # the worker chooses which: the host must lose that one, not another
        pending.add("x" if taken == "y" else "y")  # ... and the other comes back (one left removed)
        log.pop(0)
        log += [9]
        return taken

    taken = invoke(work, {"name": "t"})
    assert calls == {"t": 1} and type(calls) is collections.defaultdict and calls["missing"] == 0
    assert tally == collections.Counter({"t": 1})
    assert list(order) == ["b", "a"]
    assert cache == {"keep": 2}
    assert pending == {"x", "y"} - {taken} | {"x" if taken == "y" else "y"}
    assert log == [2, 3, 9]
    invoke(work, {"name": "t"})
    assert calls["t"] == 2 and tally["t"] == 2  # counting across calls, in the host's objects


def test_a_tools_threads_changing_one_counter_at_once_all_reach_the_host(ex: Executor) -> None:
    tally: collections.Counter[str] = collections.Counter()

    @function_tool(executor=ex, failure_error_function=None)
    def count(threads: int, each: int) -> int:
        """Count distinct keys from several threads at once."""
        import sys
        import threading

        sys.setswitchinterval(1e-6)  # switch threads inside every change, not only between them

        def work(t: int) -> None:
            for i in range(each):
                tally.update([f"{t}-{i}"])  # a change made of steps, while the other threads change it too
        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return len(tally)

    assert invoke(count, {"threads": 4, "each": 50}) == 200
    assert len(tally) == 200 and set(tally.values()) == {1}  # each key once in the host: none lost, none twice


def test_calls_running_at_once_all_land_in_the_host_list(ex: Executor) -> None:
    seen: list[int] = []

    @function_tool(executor=ex, failure_error_function=None)
    async def note(n: int) -> int:
        """Note a number."""
        await asyncio.sleep(0.5)
        seen.append(n)
        return n

    async def main() -> list[Any]:
        calls = []
        for n in range(6):
            raw = json.dumps({"n": n})
            ctx = ToolContext(None, tool_name=note.name, tool_call_id=f"c{n}", tool_arguments=raw)
            calls.append(note.on_invoke_tool(ctx, raw))
        return await asyncio.gather(*calls)

    assert asyncio.run(main()) == list(range(6))
    assert sorted(seen) == list(range(6))


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.pids: list[int] = []
        self.scratch = "temporary"

    def __call__(self, value: int) -> int:
        self.calls += 1
        self.pids.append(os.getpid())
        self.last = value
        del self.scratch
        return value * 2


def test_a_callable_objects_attributes_get_the_workers_changes(ex: Executor) -> None:
    counter = Counter()
    t = function_tool(counter, executor=ex, failure_error_function=None)
    assert invoke(t, {"value": 4}) == 8
    assert counter.calls == 1 and counter.last == 4 and not hasattr(counter, "scratch")
    assert len(counter.pids) == 1 and counter.pids[0] != os.getpid()
    counter.scratch = "again"
    assert invoke(t, {"value": 5}) == 10
    assert counter.calls == 2 and counter.last == 5 and len(counter.pids) == 2


class Boom(Exception):
    pass


def test_changes_made_before_a_raise_land_and_the_error_keeps_its_type(ex: Executor) -> None:
    seen: list[str] = []

    def fail(x: str) -> None:
        seen.append(x)
        raise Boom(f"no {x}")

    with pytest.raises(Boom, match="no y"):
        pooled_call(ex, fail, ("y",), {})
    assert seen == ["y"]


class Holder:
    def __init__(self) -> None:
        self.lock: Any = None
        self.n = 0

    def take(self) -> int:
        self.lock = (i for i in range(3))  # a generator: cannot be sent back
        self.n += 1
        return self.n


def test_an_attribute_that_cannot_come_back_is_named_and_the_rest_lands(ex: Executor,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    holder = Holder()
    with caplog.at_level(logging.WARNING, logger="toolfork.adapters.callables"):
        assert pooled_call(ex, holder.take, (), {}) == 1
    assert holder.n == 1 and holder.lock is None
    assert any("lock" in r.getMessage() and "cannot be sent back" in r.getMessage() for r in caplog.records)


def test_a_call_killed_at_its_timeout_keeps_what_it_changed_before(tmp_path: Any) -> None:
    seen: list[str] = []

    def stuck() -> None:
        seen.append("started")
        import time

        time.sleep(60)

    with Executor([], workers=1, timeout=2) as ex:
        with pytest.raises(Exception, match=r"timeout|timed out"):
            pooled_call(ex, stuck, (), {})
        assert seen == ["started"]
        seen.clear()
        assert pooled_call(ex, lambda: seen.append("next") or len(seen), (), {}) == 1  # the pool still serves
        assert seen == ["next"]
