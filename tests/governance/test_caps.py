"""Concurrency caps: per tool and per group, never waiting, released exactly once, exact under threads."""

from __future__ import annotations

import threading

import pytest

from toolfork.governance import CapError, ConcurrencyCaps


def test_a_tool_cap_holds_and_a_free_tool_is_not_held() -> None:
    caps = ConcurrencyCaps()
    caps.register("slow", max_concurrency=2)
    first, second = caps.try_acquire("slow"), caps.try_acquire("slow")
    assert first is not None and second is not None
    assert caps.try_acquire("slow") is None and not caps.can_acquire("slow")
    free = [caps.try_acquire("free") for _ in range(50)]
    assert all(s is not None for s in free)  # never registered: no cap
    caps.release(first)
    assert caps.running("slow") == 1 and caps.can_acquire("slow")
    assert caps.try_acquire("slow") is not None and caps.try_acquire("slow") is None


def test_a_group_cap_is_shared_by_its_tools() -> None:
    caps = ConcurrencyCaps({"db": 3})
    caps.register("query", concurrency_group="db")
    caps.register("insert", concurrency_group="db", max_concurrency=1)
    slots = [caps.try_acquire("query"), caps.try_acquire("insert"), caps.try_acquire("query")]
    assert all(s is not None for s in slots)
    assert caps.running_in_group("db") == 3
    assert caps.try_acquire("query") is None and caps.try_acquire("insert") is None
    caps.release(slots[0])  # a query's slot frees room for the group, but insert is at its own cap
    assert caps.try_acquire("insert") is None and caps.try_acquire("query") is not None


def test_unknown_groups_and_bad_caps_are_refused_naming_the_setting() -> None:
    caps = ConcurrencyCaps({"db": 5})
    with pytest.raises(CapError, match=r"concurrency_group='web' of tool 'fetch' has no cap.*groups with a cap: db"):
        caps.register("fetch", concurrency_group="web")
    for bad in (0, -1, True, "2", 2.0):
        with pytest.raises(CapError, match=r"max_concurrency of tool 'fetch'="):
            caps.register("fetch", max_concurrency=bad)  # type: ignore[arg-type]
    with pytest.raises(CapError, match=r"concurrency\['db'\]=0"):
        ConcurrencyCaps({"db": 0})
    with pytest.raises(CapError, match="group name ''"):
        ConcurrencyCaps({"": 1})


def test_a_slot_is_released_exactly_once() -> None:
    caps = ConcurrencyCaps()
    caps.register("t", max_concurrency=1)
    slot = caps.try_acquire("t")
    assert slot is not None
    caps.release(slot)
    with pytest.raises(RuntimeError, match="released twice"):
        caps.release(slot)
    assert caps.running("t") == 0


def test_threads_never_exceed_the_cap_and_the_books_balance() -> None:
    caps = ConcurrencyCaps({"g": 3})
    caps.register("a", max_concurrency=2, concurrency_group="g")
    caps.register("b", concurrency_group="g")
    peak = {"a": 0, "g": 0}
    lock = threading.Lock()

    def work(tool: str) -> None:
        for _ in range(2000):
            slot = caps.try_acquire(tool)
            if slot is None:
                continue
            with lock:
                peak["a"] = max(peak["a"], caps.running("a"))
                peak["g"] = max(peak["g"], caps.running_in_group("g"))
            caps.release(slot)

    threads = [threading.Thread(target=work, args=(tool,)) for tool in ("a", "a", "a", "b", "b", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak["a"] <= 2 and peak["g"] <= 3
    assert caps.running("a") == caps.running("b") == caps.running_in_group("g") == 0
