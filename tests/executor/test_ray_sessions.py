"""Sessions in Ray mode: each session a Ray actor of its own, with a fork session's faults and words.

Real local Ray (``conftest_ray.ray_cluster``, started once for the suite, in the Ray xdist group): the
actors are Ray worker processes, the crashes are ``os._exit`` in them, the timeouts kill them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pytest

from tests.executor import session_tools as S
from tests.executor import tools_for_tests as T
from tests.executor.conftest_ray import ray_cluster  # noqa: F401 - a fixture
from tests.executor.session_tools import dep, spoil, values
from tests.procs import gone
from toolfork import SessionLost, ToolRuntime, tool
from toolfork.executor import Executor, ToolCall, TooManySessions

pytestmark = pytest.mark.ray  # in one of the Ray xdist groups (tests/conftest.py, RayGroups)


@pytest.fixture(scope="module")
def ex(ray_cluster: Any) -> Iterator[Executor]:  # noqa: F811 - the fixture
    """One executor for the module: each test opens (and closes) sessions of its own on it."""
    with Executor([*S.SESSION_TOOLS, S.start_daemon, S.slow_effect, T.add], mode="ray", workers=2,
                  kill_grace=0.3) as ex:
        yield ex


def test_each_session_is_an_actor_of_its_own_whose_state_persists(ex: Executor) -> None:
    before = dict.fromkeys([("deposit", "ok")], 0) | dict(ex.stats().calls)
    with ex.session(S.Account, "ada") as a, ex.session(S.Account, "bob", balance=100) as b:
        assert a.pid != b.pid and os.getpid() not in (a.pid, b.pid)
        for i in range(3):  # interleaved: each call reaches its own session's state
            assert values(a.run([dep(i, 1)])) == [i + 1]
            assert values(b.run([dep(i, 10)])) == [110 + 10 * i]
        assert values(a.run([ToolCall("w", "where", {})])) == [[a.pid, 1]]
        assert (a.snapshot().owner, a.snapshot().balance, a.snapshot().history) == ("ada", 3, [1, 1, 1])
        assert b.snapshot().balance == 130
        assert values(ex.run([ToolCall("p", "add", {"a": 1, "b": 2})])) == [3]  # the pool's tasks go on
        assert values(a.run([ToolCall("w", "where", {})]))[0][1] == 1  # a task has no state; the actor has
    assert ex.stats().calls[("deposit", "ok")] - before[("deposit", "ok")] == 6  # counted as any call


@pytest.mark.parametrize("checkpoint", [False, True], ids=["lost", "restored"])
@pytest.mark.parametrize(("how", "timeout", "status"), [("exit", None, "crashed"), ("hang", 1.0, "timeout")])
def test_a_crash_or_a_timeout_kills_the_actor_and_loses_or_restores_the_session(
        ex: Executor, how: str, timeout: float | None, status: str, checkpoint: bool) -> None:
    with ex.session(S.Account, "ada", checkpoint=checkpoint) as s:
        assert values(s.run([dep(1, 5)])) == [5]
        first = s.pid
        t0 = time.monotonic()
        results = s.run([spoil(how, timeout), dep(2, 1)])
        assert time.monotonic() - t0 < 10  # a timeout of 1 s holds (margins for a loaded machine)
        assert results[0].status == status
        assert first is not None and gone(first)  # the actor's process is gone either way
        if checkpoint:  # a new actor took over, with the state from before the failed call
            assert values(results) == [status, 6] and s.restores == 1 and s.pid != first
            assert (s.snapshot().balance, s.snapshot().history) == (6, [5, 1])
        else:
            assert results[1].error is not None and results[1].error.type == "SessionLost"
            with pytest.raises(SessionLost) as lost:
                s.run([dep(3, 1)])
            assert lost.value.call_id == f"spoil-{how}" and lost.value.reason.startswith(f"it {status}: ")


def test_ray_sessions_give_what_fork_sessions_give(make_executor: Callable[..., Executor],
                                                   ex: Executor) -> None:
    fork = make_executor([*S.SESSION_TOOLS, S.start_daemon, T.add], mode="fork", kill_grace=0.3)
    calls = [dep(1, 5), spoil("raise"), dep(2, 1), ToolCall("bad", "deposit", {"amount": "x"}),
             ToolCall("nope", "no_such_tool", {}), spoil("exit"), dep(3, 2), spoil("hang", 0.5), dep(4, 3)]
    got = {}
    for name, e in (("fork", fork), ("ray", ex)):
        with e.session(S.Account, "ada", checkpoint=True) as s:
            results = s.run(calls)
            got[name] = ([(r.status, r.output.data if r.ok else r.error.type) for r in results],  # type: ignore[union-attr]
                         s.restores, s.snapshot())
    assert got["ray"] == got["fork"]
    assert got["ray"][0][0] == ("ok", 5) and got["ray"][2].balance == 1011  # the raise kept its effect


def test_close_ends_the_actor_and_everything_it_started(ex: Executor, tmp_path: Any) -> None:
    """A daemon the factory started and one a call started (each in a session and group of its own) go
    with the actor at ``close()``; so does a call hanging in another thread, whose result says so."""
    pid_file = tmp_path / "daemon.pid"
    s = ex.session(S.WithDaemon, "ada", str(pid_file))
    by_factory = int(pid_file.read_text())
    [started] = values(s.run([ToolCall("d", "start_daemon", {})]))
    actor = s.pid
    assert actor is not None and all(psutil.pid_exists(p) for p in (by_factory, started, actor))
    hung: list[Any] = []
    runner = threading.Thread(target=lambda: hung.extend(s.run([spoil("hang")])))
    runner.start()
    time.sleep(0.5)  # the call is running in the actor
    s.close()
    runner.join(10)
    assert not runner.is_alive() and hung[0].status == "crashed"
    assert all(gone(p) for p in (actor, by_factory, started))


def test_cancelling_the_task_awaiting_arun_kills_the_actor_and_loses_the_session(ex: Executor,
                                                                               tmp_path: Any) -> None:
    """As in fork mode: the call's effect never lands, and the session is lost (its state may be half
    changed) instead of running the call on unseen."""
    effect = tmp_path / "effect"
    with ex.session(S.Account, "ada") as s:
        actor = s.pid

        async def cancel_it() -> None:
            task = asyncio.ensure_future(s.arun([ToolCall("e", "slow_effect", {"path": str(effect), "seconds": 2})]))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancel_it())
        assert actor is not None and gone(actor)
        time.sleep(2)
        assert not effect.exists(), "the cancelled call ran on"
        with pytest.raises(SessionLost):
            s.run([dep(1, 1)])


@pytest.mark.parametrize("checkpoint", [False, True], ids=["lost", "restored"])
def test_what_the_factory_and_calls_started_dies_with_an_actor_that_crashes(ex: Executor, tmp_path: Any,
                                                                           checkpoint: bool) -> None:
    """A crashed actor cannot be asked for its descendants: its process group goes, and so does each
    child it named with its last result (the daemons, orphaned below it, are its children)."""
    pid_file = tmp_path / "daemon.pid"
    with ex.session(S.WithDaemon, "ada", str(pid_file), checkpoint=checkpoint) as s:
        by_factory = int(pid_file.read_text())
        [by_call] = values(s.run([ToolCall("d", "start_daemon", {})]))
        assert psutil.pid_exists(by_factory) and psutil.pid_exists(by_call)
        assert s.run([spoil("exit")])[0].status == "crashed"
        assert gone(by_factory) and gone(by_call)
        if checkpoint:  # the new actor goes on from the state; the processes were the dead actor's
            assert values(s.run([dep(1, 1)])) == [1]


def test_any_factory_opens_and_what_cannot_be_is_named(ex: Executor) -> None:
    got = []
    for factory, args in S.every_kind_of_factory():
        with ex.session(factory, *args) as s:
            got.append(values(s.run([dep(1, 1)]))[0])
    assert got == [2, 6, 3, 4]
    with pytest.raises(RuntimeError, match="the session's factory failed: no account for eve"):
        ex.session(S.broken_factory, "eve")
    with pytest.raises(TypeError, match=r"checkpoint=True in Ray mode .* \(a Unsendable\) cannot be pickled"):
        ex.session(S.Unsendable, checkpoint=True)
    with ex.session(S.Unsendable) as s:  # no checkpoint: it opens; its snapshot alone fails
        with pytest.raises(RuntimeError, match=r"\(a Unsendable\) cannot be pickled"):
            s.snapshot()
        assert values(s.run([ToolCall("w", "where", {})])) == [[s.pid, 1]]
    with ex.session(S.DiesWhenSent) as s:  # its pickling ends the actor: lost, and no later call runs on it
        assert values(s.run([dep(1, 5)])) == [5]
        with pytest.raises(SessionLost, match="the session's Ray actor died while sending its state"):
            s.snapshot()
        with pytest.raises(SessionLost):
            s.run([dep(2, 1)])


def test_a_factory_that_never_returns_is_killed_at_the_timeout_and_sessions_are_bounded(
        make_executor: Callable[..., Executor], ray_cluster: Any, tmp_path: Any) -> None:  # noqa: F811
    ex = make_executor([*S.SESSION_TOOLS], mode="ray", timeout=1.0, max_sessions=1)
    pid_file = tmp_path / "pid"
    with pytest.raises(TimeoutError, match=r"factory did not return within the executor's timeout \(1 s\); its "
                                           r"Ray actor was killed"):
        ex.session(S.stuck_factory, str(pid_file))
    assert gone(int(pid_file.read_text()))
    with ex.session(S.Account, "ada") as s:
        with pytest.raises(TooManySessions):
            ex.session(S.Account, "bob")
        assert values(s.run([dep(1, 5)])) == [5]
    from toolfork import Limits
    from toolfork.governance.enforceable import SandboxUnavailable

    with pytest.raises(SandboxUnavailable, match="Ray's own worker processes, which cannot enter the sandbox"):
        ex.session(S.Account, "eve", limits=Limits(network=False))


def test_a_session_job_runs_on_ray_actors(tmp_path: Any, ray_cluster: Any) -> None:  # noqa: F811
    """``toolfork run --session-factory --mode ray`` (in this process, on the suite's Ray): one actor per
    key, lines in input order, as in fork mode."""
    import json

    from toolfork.cli import main

    lines = [{"id": "a1", "name": "deposit", "arguments": {"amount": 5}, "session": "ann",
              "session_args": {"owner": "ann"}},
             {"id": "b1", "name": "deposit", "arguments": {"amount": 1}, "session": "bob",
              "session_args": ["bob", 100]},
             {"id": "a2", "name": "deposit", "arguments": {"amount": 5}, "session": "ann"}]
    (tmp_path / "calls.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    assert main(["run", str(tmp_path / "calls.jsonl"), "-o", str(out), "--mode", "ray",
                 "--tools", "tests.executor.session_tools:deposit",
                 "--session-factory", "tests.executor.session_tools:Account"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["status"], r["output"]["data"]) for r in records] == [
        ("a1", "ok", 5), ("b1", "ok", 101), ("a2", "ok", 10)]


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP"])
def test_a_spare_actor_killed_or_stopped_while_it_waits_is_not_used(ex: Executor, sig: str) -> None:
    """The actor started ahead for the next session is a process a tool can reach: one found dead or
    stopped is ended, and the session opens on a new actor."""
    import signal

    with ex.session(S.Account, "ada") as s:  # the executor has a spare from now on
        assert values(s.run([dep(1, 1)])) == [1]
        spares = ex.backend._actors._spares  # type: ignore[attr-defined]
        [spare] = list(spares)
        pid, _node = ex.backend._ray.get(spare._ready, timeout=60)  # type: ignore[attr-defined]
        os.kill(pid, getattr(signal, sig))
        if sig == "SIGKILL":
            assert gone(pid)
        else:  # stopped once it is scheduled (a loaded machine may take a while): then the session opens
            end = time.monotonic() + 30
            while psutil.Process(pid).status() != psutil.STATUS_STOPPED and time.monotonic() < end:
                time.sleep(0.05)
        with ex.session(S.Account, "bob", balance=10) as other:
            assert other.pid != pid and values(other.run([dep(2, 1)])) == [11]
    assert gone(pid)


@tool
def env_var(name: str, runtime: ToolRuntime) -> list[str]:
    """A variable of the process running the call.

    Args:
        name: the variable
    """
    return [os.environ.get(name, "")]


def test_the_actors_get_the_runtime_env_of_the_tasks(make_executor: Callable[..., Executor],
                                                     ray_cluster: Any) -> None:  # noqa: F811
    """``ray_options``' runtime_env (what the tools import, their variables) reaches the sessions' actors."""
    ex = make_executor([env_var], mode="ray", ray_options={"runtime_env": {"env_vars": {"TOOLFORK_ENV": "set"}}})
    with ex.session(dict) as s:
        assert values(s.run([ToolCall("e", "env_var", {"name": "TOOLFORK_ENV"})])) == [["set"]]


@tool
def forge_later_ids(runtime: ToolRuntime) -> str:
    """Make every later result of this process claim another call's id, tool and pid."""
    import dataclasses

    from toolfork.executor.backends import ray_task

    real = ray_task.execute_call

    def forged(*args: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(real(*args, **kwargs), call_id="someone-else", name="add", worker_pid=1)

    ray_task.execute_call = forged
    return "forged"


def test_a_result_is_the_call_the_host_sent_whatever_the_actor_says(make_executor: Callable[..., Executor],
                                                                    ray_cluster: Any) -> None:  # noqa: F811
    ex = make_executor([forge_later_ids, *S.SESSION_TOOLS], mode="ray")
    with ex.session(S.Account, "ada") as s:
        s.run([ToolCall("f", "forge_later_ids", {})])
        [r] = s.run([dep(1, 5)])
        assert (r.call_id, r.name, r.worker_pid, r.output.data) == ("d1", "deposit", s.pid, 5)  # type: ignore[union-attr]
