"""Host-state mirroring under attack: changes whose arguments are iterators, operators that mean something
else on a Counter, in-place operators, calls running at once that take items from one shared container,
and a silent connection to the host's relay. Each tool runs in a real forked worker and changes
containers of the host through the Agents SDK decorator (toolfork/adapters/host_state.py, relay.py)."""

from __future__ import annotations

import asyncio
import collections
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.tool_context import ToolContext

from tests.adapters.test_host_state import invoke
from toolfork.adapters.openai_agents import function_tool
from toolfork.adapters.relay import CallObjects
from toolfork.executor import Executor


@pytest.fixture
def ex() -> Iterator[Executor]:
    with Executor([], workers=2, timeout=20) as executor:
        yield executor


def at_once(t: Any, arguments: list[dict[str, Any]]) -> list[Any]:
    """Call ``t`` once per arguments, all at once (as the SDK runs a turn's tool calls)."""

    async def main() -> list[Any]:
        calls = []
        for n, args in enumerate(arguments):
            raw = json.dumps(args)
            ctx = ToolContext(None, tool_name=t.name, tool_call_id=f"c{n}", tool_arguments=raw)
            calls.append(t.on_invoke_tool(ctx, raw))
        return await asyncio.gather(*calls)

    return asyncio.run(main())


def test_iterator_arguments_reach_the_host_whole(ex: Executor) -> None:
    log: list[int] = [0]
    table: dict[str, int] = {}
    tags: set[int] = set()
    tally: collections.Counter[str] = collections.Counter()

    @function_tool(executor=ex, failure_error_function=None)
    def fill() -> int:
        """Change every container with an iterator."""
        nonlocal log
        log.extend(i for i in range(1, 4))
        log += (i for i in (4, 5))
        table.update(zip("ab", [1, 2], strict=True))
        table.update(map(lambda k: (k, 0), "cd"))
        tags.update(iter([7, 8]))
        tally.update(c for c in "aab")
        return len(log)

    assert invoke(fill, {}) == 6
    assert log == [0, 1, 2, 3, 4, 5]
    assert table == {"a": 1, "b": 2, "c": 0, "d": 0}
    assert tags == {7, 8}
    assert tally == collections.Counter(a=2, b=1)


def test_counter_and_list_operators_mean_in_the_host_what_they_meant_in_the_worker(ex: Executor) -> None:
    union: collections.Counter[str] = collections.Counter(a=5)
    plus: collections.Counter[str] = collections.Counter(a=5, b=1)
    minus: collections.Counter[str] = collections.Counter(a=5)
    both: collections.Counter[str] = collections.Counter(a=5, b=2)
    rows = [1, 2]

    @function_tool(executor=ex, failure_error_function=None)
    def operate() -> str:
        """Apply the in-place operators."""
        nonlocal union, plus, minus, both, rows
        union |= collections.Counter(a=3, c=1)  # the larger count: a stays 5
        plus += collections.Counter(a=-10, b=2)  # adds, then drops what is not positive
        minus -= collections.Counter(a=2, z=1)
        both &= collections.Counter(a=1, b=9)  # the smaller count
        rows *= 3
        return repr((dict(union), dict(plus), dict(minus), dict(both), list(rows)))

    in_worker = invoke(operate, {})
    assert in_worker == repr(({"a": 5, "c": 1}, {"b": 3}, {"a": 3}, {"a": 1, "b": 2}, [1, 2, 1, 2, 1, 2]))
    assert union == collections.Counter(a=5, c=1)
    assert plus == collections.Counter(b=3)
    assert minus == collections.Counter(a=3)
    assert both == collections.Counter(a=1, b=2)
    assert rows == [1, 2, 1, 2, 1, 2]


def test_calls_taking_items_from_one_shared_set_and_dict_at_once_take_each_item_once(ex: Executor) -> None:
    queue_set = set(range(60))
    queue_dict = {f"k{i}": i for i in range(60)}

    @function_tool(executor=ex, failure_error_function=None)
    async def take(n: int) -> list[Any]:
        """Take n items from each shared container, one at a time."""
        got: list[Any] = []
        for _ in range(n):
            got.append(queue_set.pop())
            got.append(queue_dict.popitem()[1])
            await asyncio.sleep(0.005)
        return got

    first, second = at_once(take, [{"n": 30}, {"n": 30}])
    from_set = first[0::2] + second[0::2]
    from_dict = first[1::2] + second[1::2]
    assert sorted(from_set) == list(range(60))  # every item taken once: none twice, none left behind
    assert sorted(from_dict) == list(range(60))
    assert queue_set == set() and queue_dict == {}


def test_setdefault_from_calls_at_once_gives_every_call_the_hosts_value(ex: Executor) -> None:
    owners: dict[str, int] = {}
    names = ["a", "b", "c", "d"]

    @function_tool(executor=ex, failure_error_function=None)
    async def claim(me: int) -> list[int]:
        """Claim each name unless another call has."""
        got = []
        for name in names:
            got.append(owners.setdefault(name, me))
            await asyncio.sleep(0.01)
        return got

    first, second = at_once(claim, [{"me": 1}, {"me": 2}])
    assert first == second == [owners[n] for n in names]  # both calls saw the one owner the host kept


def test_a_silent_connection_to_the_relay_does_not_hold_another_calls_changes(ex: Executor) -> None:
    seen: list[int] = []

    @function_tool(executor=ex, failure_error_function=None)
    def note(count: int) -> int:
        """Append count numbers, one change at a time."""
        for i in range(count):
            seen.append(i)
        return len(seen)

    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(CallObjects().server.address)  # connects, never sends: the host waits 30 s for it at most
    try:
        assert invoke(note, {"count": 20}) == 20  # the call's 20 s timeout is well before those 30 s
    finally:
        silent.close()
    assert seen == list(range(20))
