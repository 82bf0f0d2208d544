"""A backend declares what it can do (``Capabilities``) and every decision about it reads that, never its
mode string: a backend that says it cannot do a thing is refused it with its own words, whatever its
name. Tried by giving a backend a name that used to grant the thing and capabilities that deny it."""

from __future__ import annotations

import dataclasses
import logging
import math

import pytest

from toolfork import Limits, LimitsNotEnforceable, Tool
from toolfork.agent.timeouts import lift_unenforceable
from toolfork.executor import Executor, ToolCall
from toolfork.executor.backends.capabilities import Capabilities
from toolfork.executor.backends.fork.pool import ForkBackend
from toolfork.executor.backends.ray import RayBackend
from toolfork.executor.backends.sequential import SequentialBackend
from toolfork.executor.sessions.session import SessionUnavailable
from toolfork.governance import Governance


def echo(x: int = 0) -> int:
    """Echo."""
    return x


def build_state() -> dict[str, int]:
    return {"n": 0}


FORK = ForkBackend.capabilities


def test_a_backend_must_say_why_it_lacks_a_capability() -> None:
    with pytest.raises(ValueError, match=r"backend 'odd': say why it cannot do limits, sessions"):
        dataclasses.replace(FORK, name="odd", limits=False, sessions=False)
    with pytest.raises(ValueError, match=r"why_not names unknown capabilities \['flying'\]"):
        dataclasses.replace(FORK, why_not={"flying": "no wings"})
    caps = dataclasses.replace(FORK, limits=False, why_not={"limits": "no rlimits here"})
    with pytest.raises(TypeError):
        caps.why_not["limits"] = "changed"  # type: ignore[index]  # frozen, its words too


def test_each_backend_declares_what_it_can_do() -> None:
    assert (FORK.limits, FORK.recycles, FORK.sessions, FORK.kills_at_deadline, FORK.in_host) == (
        True, True, True, True, False)
    seq = SequentialBackend.capabilities
    assert (seq.limits, seq.recycles, seq.sessions, seq.kills_at_deadline, seq.in_host) == (
        False, False, True, False, True)
    ray = RayBackend.capabilities
    assert (ray.limits, ray.recycles, ray.sessions, ray.kills_at_deadline, ray.in_host) == (
        False, False, True, True, False)


def test_governance_refuses_limits_the_capabilities_deny_whatever_the_name() -> None:
    caps = dataclasses.replace(FORK, limits=False, why_not={"limits": "this pool runs calls on a shared GPU host"})
    with pytest.raises(LimitsNotEnforceable, match=r"tool 't': cpu_s=1.0 cannot be enforced here: this pool runs "
                                                   r"calls on a shared GPU host"):
        Governance(caps).register([Tool("t", fn=echo, limits=Limits(cpu_s=1))])
    Governance(FORK).register([Tool("t", fn=echo, limits=Limits(cpu_s=1))])  # the pool as it is takes them


def test_recycling_is_refused_or_warned_as_the_capabilities_say(caplog: pytest.LogCaptureFixture) -> None:
    workers_of_others = dataclasses.replace(FORK, recycles=False, why_not={"recycles": "its workers are leased"})
    with pytest.raises(ValueError, match="max_calls_per_worker and max_worker_memory_mb recycle workers; its "
                                         "workers are leased"):
        Governance(workers_of_others, max_calls_per_worker=3)
    no_workers = dataclasses.replace(workers_of_others, has_workers=False)
    with caplog.at_level(logging.WARNING, logger="toolfork.governance"):
        Governance(no_workers, max_worker_memory_mb=100)
    assert "its workers are leased" in caplog.text


def test_the_executor_reads_its_backends_capabilities() -> None:
    with Executor([echo], mode="sequential") as ex:
        assert ex.capabilities is SequentialBackend.capabilities
        assert ex.run([ToolCall("1", "echo", {"x": 2})])[0].status == "ok"


def test_a_session_is_refused_with_the_backends_words_when_it_cannot_host_one() -> None:
    with Executor([echo], mode="sequential") as ex:
        ex.backend.capabilities = dataclasses.replace(  # type: ignore[misc]
            ex.backend.capabilities, sessions=False, why_not={**ex.backend.capabilities.why_not,
                                                              "sessions": "this backend keeps no state"})
        with pytest.raises(SessionUnavailable, match="this backend keeps no state"):
            ex.session(build_state)


def test_the_agent_lifts_the_timeouts_a_backend_cannot_enforce() -> None:
    tools = {"echo": Tool("echo", fn=echo, timeout=5)}

    def lifted(caps: Capabilities) -> dict[str, float]:
        calls = [ToolCall("1", "echo", {})]
        out = lift_unenforceable(calls, tools, caps, None, preemptible=False)
        assert (calls[0].timeout == math.inf) == bool(out)
        return out

    assert lifted(FORK) == {}
    assert lifted(SequentialBackend.capabilities) == {"1": 5.0}
    assert lifted(dataclasses.replace(FORK, kills_at_deadline=False,
                                      why_not={"kills_at_deadline": "it cannot stop a call"})) == {"1": 5.0}
