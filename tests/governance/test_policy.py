"""Governance: one Executor's rules, decided once (no processes here: the Executor tests run them)."""

from __future__ import annotations

import logging
import re
import threading
import time

import pytest

from toolfork import Limits, LimitsNotEnforceable, Tool
from toolfork.executor.backends.fork.pool import ForkBackend
from toolfork.executor.backends.ray import RayBackend
from toolfork.executor.backends.sequential import SequentialBackend
from toolfork.governance import Governance, SandboxUnavailable

BACKENDS = {"fork": ForkBackend, "ray": RayBackend, "sequential": SequentialBackend}


def _fn(x: int = 0) -> int:
    """Echo."""
    return x


def make(name: str, **settings: object) -> Tool:
    return Tool(name, fn=_fn, **settings)  # type: ignore[arg-type]


def test_a_tools_own_limits_win_over_the_default_field_by_field() -> None:
    g = Governance(ForkBackend.capabilities, limits=Limits(memory_mb=64, cpu_s=5))
    g.register([make("own", limits=Limits(memory_mb=512)), make("plain")])
    assert g.limits_for("own") == Limits(memory_mb=512, cpu_s=5)
    assert g.limits_for("plain") == Limits(memory_mb=64, cpu_s=5)
    assert g.limits_for("unknown") is None


def test_only_restrictions_make_a_tool_restricted_and_only_caps_or_rates_make_it_gated() -> None:
    g = Governance(ForkBackend.capabilities, concurrency={"db": 2})
    g.register([make("net", limits=Limits(network=False)), make("mem", limits=Limits(memory_mb=64)),
                make("capped", max_concurrency=1), make("grouped", concurrency_group="db"),
                make("rated", rate_limit="5/s"), make("free"), make("net_on", limits=Limits(network=True))])
    assert [n for n in ("net", "mem", "capped", "free", "net_on") if g.restricted(n)] == ["net"]
    assert [n for n in ("net", "mem", "capped", "grouped", "rated", "free") if g.gated(n)] == \
        ["capped", "grouped", "rated"]
    assert g.alone == {"net", "capped", "grouped", "rated"}


def test_an_executor_with_no_governance_shapes_nothing() -> None:
    g = Governance(ForkBackend.capabilities)
    g.register([make("a"), make("b", limits=Limits(enforce="best-effort"))])
    assert not g.alone and not g.any_gated and not g.recycles
    assert g.limits_for("b") is None  # enforce alone limits nothing


def test_caps_admit_up_to_the_cap_and_a_release_lets_the_next_in() -> None:
    g = Governance(ForkBackend.capabilities, concurrency={"db": 3})
    g.register([make("one", max_concurrency=2), make("q1", concurrency_group="db"),
                make("q2", concurrency_group="db")])
    a, b = g.admit("one"), g.admit("one")
    assert a is not None and b is not None and g.admit("one") is None
    g.release(a)
    assert g.admit("one") is not None
    held = [g.admit("q1"), g.admit("q2"), g.admit("q1")]
    assert all(s is not None for s in held) and g.admit("q2") is None and g.admit("q1") is None
    g.release(held[0])  # type: ignore[arg-type]
    assert g.admit("q2") is not None


def test_a_slot_cannot_be_released_twice() -> None:
    g = Governance(ForkBackend.capabilities)
    g.register([make("one", max_concurrency=1)])
    slot = g.admit("one")
    assert slot is not None
    g.release(slot)
    with pytest.raises(RuntimeError, match="released twice"):
        g.release(slot)


def test_a_rate_limited_tool_gets_a_token_an_interval_apart_and_wake_at_says_when() -> None:
    g = Governance(ForkBackend.capabilities)
    g.register([make("rated", rate_limit="10/s"), make("both", rate_limit="10/s", max_concurrency=1)])
    assert g.admit("rated", now=100.0) is not None
    assert g.admit("rated", now=100.05) is None
    assert g.wake_at(["rated"]) is not None
    assert g.admit("rated", now=100.1) is not None
    slot = g.admit("both", now=100.0)
    assert slot is not None
    # Its cap is full: only a release can let the next call in, so no token time is offered (the
    # driver would otherwise wake at once, again and again).
    assert g.wake_at(["both"]) is None


def test_a_refused_cap_does_not_spend_a_token() -> None:
    g = Governance(ForkBackend.capabilities)
    g.register([make("both", rate_limit="1/h", max_concurrency=1)])
    first = g.admit("both", now=0.0)
    assert first is not None
    g.release(first)
    held = g.admit("both", now=7200.0)
    assert held is not None
    assert g.admit("both", now=10800.0) is None  # the cap refuses: the token of that hour stays
    g.release(held)
    assert g.admit("both", now=10800.0) is not None


def test_acquire_waits_for_a_token_and_gives_up_when_stopped() -> None:
    g = Governance(SequentialBackend.capabilities)
    g.register([make("rated", rate_limit="4/s"), make("capped", max_concurrency=1)])
    start = time.monotonic()
    slots = [g.acquire("rated") for _ in range(3)]
    assert all(s is not None for s in slots)
    assert time.monotonic() - start >= 0.4  # three tokens a quarter second apart
    held = g.acquire("capped")
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    assert g.acquire("capped", stop.is_set) is None
    assert held is not None
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(g.acquire("capped")))
    waiter.start()
    time.sleep(0.2)
    assert got == []  # still waiting for the slot
    g.release(held)
    waiter.join(10)
    assert got and got[0] is not None


def test_register_is_all_or_nothing_and_names_the_missing_group() -> None:
    g = Governance(ForkBackend.capabilities, concurrency={"db": 2})
    with pytest.raises(ValueError, match=r"concurrency_group='cache' of tool 'q' has no cap.*groups with a cap: db"):
        g.register([make("ok", max_concurrency=1), make("q", concurrency_group="cache")])
    assert not g.gated("ok")


@pytest.mark.parametrize("concurrency, message", [
    ({"db": 0}, r"concurrency\['db'\]=0 must be a whole number of at least 1"),
    ({"": 2}, "group name '' must be a non-empty string"),
])
def test_bad_group_caps_are_refused_naming_them(concurrency: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Governance(ForkBackend.capabilities, concurrency=concurrency)


@pytest.mark.parametrize("setting", ["max_calls_per_worker", "max_worker_memory_mb"])
@pytest.mark.parametrize("value", [0, -3, 1.5, True])
def test_bad_recycling_settings_are_refused_naming_them(setting: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"{setting} must be a whole number"):
        Governance(ForkBackend.capabilities, **{setting: value})  # type: ignore[arg-type]


def test_limits_must_be_a_limits_value() -> None:
    with pytest.raises(TypeError, match=r"limits must be a toolfork\.Limits"):
        Governance(ForkBackend.capabilities, limits={"memory_mb": 5})  # type: ignore[arg-type]


def test_sequential_mode_refuses_limits_naming_the_tool_the_field_and_why() -> None:
    g = Governance(SequentialBackend.capabilities)
    with pytest.raises(LimitsNotEnforceable, match=r"tool 'snippet': memory_mb=256 cannot be enforced here: "
                                                   r"sequential mode runs every call in the host process"):
        g.register([make("snippet", limits=Limits(memory_mb=256))])


def test_best_effort_logs_what_it_does_not_apply(caplog: pytest.LogCaptureFixture) -> None:
    g = Governance(SequentialBackend.capabilities)
    with caplog.at_level(logging.WARNING, logger="toolfork.governance"):
        g.register([make("snippet", limits=Limits(memory_mb=256, cpu_s=1, enforce="best-effort"))])
    assert {u.field for u in g.skipped} == {"memory_mb", "cpu_s"}
    assert "not applied (enforce='best-effort')" in caplog.text and "memory_mb=256" in caplog.text


@pytest.mark.parametrize("mode, inline, why", [("sequential", False, "sequential mode runs every call in the host"),
                                               ("ray", False, "Ray mode runs calls in Ray's own worker"),
                                               ("fork", True, "it is inline")])
@pytest.mark.parametrize("limits", [Limits(network=False, enforce="best-effort"),
                                    Limits(read_paths=["/tmp"], enforce="best-effort"),
                                    Limits(sandbox=True, enforce="best-effort"), Limits(sandbox=True)],
                         ids=["network", "read_paths", "sandbox-best-effort", "sandbox"])
def test_a_sandboxed_tool_is_refused_where_there_is_no_sandbox_even_best_effort(
        mode: str, inline: bool, why: str, limits: Limits) -> None:
    g = Governance(BACKENDS[mode].capabilities)
    said = r"tool 'snippet': its calls are sandboxed \(.*\) and " + re.escape(why)
    with pytest.raises(SandboxUnavailable, match=said):
        g.register([make("snippet", inline=inline, limits=limits)])
    assert g.limits_for("snippet") is None  # nothing of it was taken


def test_an_inline_tool_cannot_be_limited_even_on_the_fork_pool() -> None:
    g = Governance(ForkBackend.capabilities)
    with pytest.raises(LimitsNotEnforceable, match=r"tool 'here'.*it is inline"):
        g.register([make("here", inline=True, limits=Limits(cpu_s=1))])


def test_ray_mode_refuses_limits_and_recycling_and_takes_caps() -> None:
    with pytest.raises(LimitsNotEnforceable, match="Ray mode runs calls in Ray's own worker processes"):
        Governance(RayBackend.capabilities).register([make("t", limits=Limits(file_size_mb=1))])
    ray = Governance(RayBackend.capabilities, concurrency={"db": 1})
    ray.register([make("t", rate_limit="1/s", max_concurrency=2), make("q", concurrency_group="db")])
    assert ray.gated("t") and ray.gated("q")  # caps and rate limits hold in Ray mode (the driver admits)
    with pytest.raises(ValueError, match="Ray mode runs calls in Ray's own workers"):
        Governance(RayBackend.capabilities, max_calls_per_worker=10)


def test_sequential_mode_has_no_workers_to_recycle_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="toolfork.governance"):
        Governance(SequentialBackend.capabilities, max_calls_per_worker=5)
    assert "sequential mode has no workers to recycle" in caplog.text
