"""The worker core's fault rules, driven directly (toolfork/executor/backends/fork/core.py): real forked
workers, a client that records what the core tells it. The pool and the line lane get these rules
through the same calls; their own tests (test_fork_pool.py, tests/cli/test_run_lane.py) show them end
to end."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.executor.tools_for_tests import ALL
from tests.procs import gone
from toolfork.executor.backends.base import WorkerSetup
from toolfork.executor.backends.fork.core import QUICK_CALL_S, WorkerCore
from toolfork.executor.backends.fork.faults import MAX_REQUEUES
from toolfork.executor.backends.fork.pool import ForkBackend
from toolfork.executor.backends.fork.workers import Worker
from toolfork.executor.types import ToolResult
from toolfork.executor.wire import frames
from toolfork.governance import Governance

BOUND_S = 60.0  # a bound on each wait, not a timing


@dataclass
class Item:
    call_id: str
    name: str
    arguments: dict[str, Any]
    timeout: float | None = None
    requeues: int = 0


@dataclass
class Recorder:
    """The core's client: what it was told, in order."""

    results: dict[str, ToolResult] = field(default_factory=dict)
    put_back_calls: list[list[str]] = field(default_factory=list)
    unwanted: set[str] = field(default_factory=set)

    def progress(self, item: Item, f: frames.Progress) -> None:
        pass

    def finished(self, w: Worker, item: Item, f: frames.ResultMessage) -> float | None:
        result = self.results[item.call_id] = f.rebuilt(item.call_id, item.name, w.pid)
        return result.duration_s

    def fail(self, item: Item, result: ToolResult) -> None:
        self.results[item.call_id] = result

    def wanted(self, item: Item) -> bool:
        return item.call_id not in self.unwanted

    def put_back(self, items: list[Item]) -> None:
        self.put_back_calls.append([i.call_id for i in items])


@pytest.fixture
def core() -> Iterator[WorkerCore]:
    c = WorkerCore({t.name: t for t in ALL}, 2, WorkerSetup(), 1.0, Governance(ForkBackend.capabilities))
    try:
        yield c
    finally:
        c.shutdown()


def send(core: WorkerCore, client: Recorder, items: list[Item]) -> Worker:
    w = core.idle.popleft()
    frame = frames.calls_frame([(i.call_id, i.name, i.arguments, i.timeout, None, None, None) for i in items])
    assert core.send(w, items, frame, client)
    return w


def drive(core: WorkerCore, client: Recorder, until: Any) -> None:
    """The driver's loop, as a client runs it: wait, read what came, bury the dead, expire."""
    end = time.monotonic() + BOUND_S
    while not until():
        assert time.monotonic() < end, f"nothing settled: {client.results}"
        for data in core.select(0.05):
            if isinstance(data, Worker) and data.wid in core.workers:
                core.read(data, client)
        core.bury(client)
        core.expire(client)


def test_a_chunk_runs_in_order_and_the_worker_comes_back_idle(core: WorkerCore) -> None:
    client = Recorder()
    items = [Item(f"a{i}", "add", {"a": i, "b": 1}) for i in range(5)]
    w = send(core, client, items)
    drive(core, client, lambda: len(client.results) == 5)
    assert [client.results[f"a{i}"].output.data for i in range(5)] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
    assert w in core.idle and not w.inflight and not w.chunks and w.deadline is None
    # The estimate learnt from the results: the moving mean of their durations, in the order they came
    # (a loaded machine can make a call of ``add`` slower than a quick one, and then it is not quick).
    mean = None
    for i in range(5):
        d = client.results[f"a{i}"].duration_s
        mean = d if mean is None else 0.8 * mean + 0.2 * d
    assert mean is not None and core.is_quick("add") == (mean < QUICK_CALL_S)


def test_a_timeout_kills_the_worker_and_the_items_behind_it_go_back(core: WorkerCore, tmp_path: Any) -> None:
    client = Recorder()
    items = [Item("ok", "add", {"a": 1, "b": 1}),
             Item("stuck", "hang", {"marker": str(tmp_path / "m")}, timeout=1.0),
             Item("behind1", "add", {"a": 2, "b": 2}), Item("behind2", "add", {"a": 3, "b": 3})]
    w = send(core, client, items)
    drive(core, client, lambda: "stuck" in client.results)
    assert client.results["ok"].status == "ok"
    assert client.results["stuck"].status == "timeout" and client.results["stuck"].worker_pid == w.pid
    assert client.put_back_calls == [["behind1", "behind2"]]  # never started: back, in order, not failed
    assert "behind1" not in client.results and items[2].requeues == 0  # a timeout does not count against them
    assert w.wid not in core.workers and len(core.workers) == core.size  # replaced: the pool keeps its size


def test_a_crash_fails_the_running_item_and_counts_against_the_rest(core: WorkerCore) -> None:
    client = Recorder()
    items = [Item("boom", "exit_now", {"code": 3}), Item("next", "add", {"a": 1, "b": 1}),
             Item("dropped", "add", {"a": 1, "b": 2})]
    client.unwanted.add("dropped")  # e.g. a cancelled call: it neither goes back nor fails
    w = send(core, client, items)
    drive(core, client, lambda: "boom" in client.results)
    crashed = client.results["boom"]
    assert crashed.status == "crashed" and "exited with code 3" in crashed.error.message  # type: ignore[union-attr]
    assert client.put_back_calls == [["next"]] and items[1].requeues == 1
    assert "dropped" not in client.results
    assert w.wid not in core.workers and len(core.workers) == core.size


def test_an_item_that_keeps_killing_its_workers_before_it_starts_fails(core: WorkerCore) -> None:
    client = Recorder()
    behind = Item("victim", "add", {"a": 1, "b": 1}, requeues=MAX_REQUEUES)  # its workers died before, 3 times
    send(core, client, [Item("boom", "exit_now", {"code": 1}), behind])
    drive(core, client, lambda: "victim" in client.results)
    assert client.results["victim"].status == "crashed"
    assert "workers died before they could start it" in client.results["victim"].error.message  # type: ignore[union-attr]
    assert client.put_back_calls == []


def test_work_sent_to_a_worker_that_died_idle_goes_back_and_the_slot_is_refilled(core: WorkerCore) -> None:
    client = Recorder()
    w = core.idle.popleft()
    assert len(core.worker_pids) == core.size  # waits until the template has reported every pid
    pid = w.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert gone(pid, BOUND_S)
    item = Item("late", "add", {"a": 1, "b": 1})
    frame = frames.calls_frame([(item.call_id, item.name, item.arguments, None, None, None, None)])
    assert not core.send(w, [item], frame, client)  # its call pipe has no reader any more
    assert client.put_back_calls == [["late"]] and client.results == {}  # never started: back, not failed
    assert w.wid not in core.workers and len(core.workers) == core.size and len(core.idle) == core.size


def test_an_idle_worker_killed_from_outside_is_replaced_and_fails_nothing(core: WorkerCore) -> None:
    client = Recorder()
    w = core.idle[0]
    assert len(core.worker_pids) == core.size  # waits until the template has reported every pid
    pid = w.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    drive(core, client, lambda: w.wid not in core.workers)
    assert client.results == {} and client.put_back_calls == []
    assert len(core.workers) == core.size and w not in core.idle


# ----------------------------------------------------------------------------- states you can see


def test_a_workers_state_follows_it_from_forked_to_running_to_lent(core: WorkerCore, tmp_path: Any) -> None:
    """``WorkerState`` read off real workers: started warm (idle), running a call, and lending its slot
    to a one-shot that the template has not reported yet (forking), then has (idle, the lender lent)."""
    from toolfork.executor.backends.fork.workers import WorkerState

    client = Recorder()
    assert {core.state_of(w) for w in core.workers.values()} == {WorkerState.IDLE}
    w = send(core, client, [Item("stuck", "hang", {"marker": str(tmp_path / "m")}, timeout=2.0)])
    assert core.state_of(w) is WorkerState.RUNNING
    lender = core.idle.popleft()
    shot = core.one_shot(lender)
    assert shot.state() in (WorkerState.FORKING, WorkerState.IDLE)  # the report may already be in
    assert core.worker_pids  # waits for every report, the one-shot's included
    assert core.state_of(shot) is WorkerState.IDLE and core.state_of(lender) is WorkerState.LENT
    drive(core, client, lambda: "stuck" in client.results)
    assert client.results["stuck"].status == "timeout"


def test_the_links_state_is_broken_once_its_template_died() -> None:
    from toolfork.executor.backends.fork.template_link import LinkState, TemplateLink

    link = TemplateLink({t.name: t for t in ALL}, WorkerSetup(), 1.0, {})
    try:
        assert link.state is LinkState.SERVING and link.pid is not None
        link.check(now=True)
        assert link.state is LinkState.SERVING  # looked at, and alive
        os.kill(link.pid, signal.SIGKILL)
        end = time.monotonic() + BOUND_S
        while link.state is LinkState.SERVING and time.monotonic() < end:
            link.check(now=True)
            time.sleep(0.01)
        assert link.state is LinkState.BROKEN and link.gone and link.broken
    finally:
        link.abandon()


def test_a_feeds_state_names_where_its_source_stands() -> None:
    from toolfork.executor.backends.dispatch import WAIT
    from toolfork.executor.backends.hub import Feed, SourceState

    source = iter([WAIT])
    feed = Feed(source)
    assert feed.state is SourceState.OPEN
    assert feed.pull() is None and feed.state is SourceState.WAITING  # a live source said WAIT
    feed.polling = True  # an inline call waits for its cap: asked again soon, the fd is not watched
    assert feed.state is SourceState.POLLING and feed.wakeup_fd is None
    feed.polling = False
    assert feed.pull() is None and feed.state is SourceState.EXHAUSTED
    feed.cancel()
    assert feed.state is SourceState.CANCELLED
