"""The Ray backend: the shared contract suite with mode="ray", plus what only Ray workers can show.

Everything runs on one local 2-CPU Ray instance (``conftest_ray.ray_cluster``), started once; the module
is one xdist group so that instance is started in one xdist worker only.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.executor import test_contract as _contract
from tests.executor import tools_for_tests as T
from tests.executor.conftest_ray import RAY_CPUS, ray_cluster, wait_gone  # noqa: F401 - a fixture
from toolfork.executor import WAIT, CallFinished, CallProgress, CallStarted, Executor, ToolCall
from toolfork.executor.backends import ray_connection
from toolfork.executor.backends.ray import RayBackend
from toolfork.tools import ToolRuntime, tool

pytestmark = pytest.mark.ray  # in one of the Ray xdist groups (tests/conftest.py, RayGroups)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mode(ray_cluster):  # noqa: F811 - the fixture imported above
    """Overrides the executor conftest's ``mode``: every contract test below runs against Ray."""
    return "ray"


# The shared contract suite (test_contract.py), collected a second time here with mode="ray".
for _name, _test in vars(_contract).items():
    if _name.startswith("test_") and callable(_test):
        globals()[_name] = _test


def _pid_gone(pid: int, seconds: float = 10.0) -> bool:
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:  # already gone, possibly between two looks
        return True
    return not wait_gone([proc], seconds)


# ----------------------------------------------------------------------------- where calls run


def test_calls_run_in_ray_workers_not_in_the_host(make_executor, mode):
    ex = make_executor(mode=mode)
    assert ex.mode == "ray" and isinstance(ex.backend, RayBackend)
    results = ex.run([ToolCall(str(i), "whoami", {}) for i in range(4)])
    pids = {r.output.data for r in results}
    assert os.getpid() not in pids
    assert all(r.worker_pid == r.output.data for r in results)


def test_the_suites_ray_workers_run_at_its_own_priority(make_executor, mode):
    """Ray's default (nice 15) is overridden for the suite (tests/conftest.py): at nice 15 beside the rest
    of the suite, a Ray worker got a few percent of a core and the Ray tests took minutes."""
    ex = make_executor(mode=mode)
    results = ex.run([ToolCall(str(i), "whoami", {}) for i in range(2)])
    for r in results:
        assert r.ok, r.error
        assert psutil.Process(r.worker_pid).nice() == os.nice(0)


def test_hooks_run_in_the_ray_worker_around_every_call(make_executor, mode, tmp_path):
    log = tmp_path / "hooks.log"

    def before() -> None:
        with log.open("a") as f:
            f.write(f"before {os.getpid()}\n")

    def after() -> None:
        with log.open("a") as f:
            f.write(f"after {os.getpid()}\n")

    ex = make_executor(mode=mode, before_child=before, after_child=after)
    results = ex.run([ToolCall(str(i), "whoami", {}) for i in range(4)] +
                     [ToolCall("f", "fail", {"message": "x"})])
    lines = log.read_text().splitlines()
    assert len(lines) == 10
    for r in results[:4]:
        assert f"before {r.output.data}" in lines and f"after {r.output.data}" in lines
    assert all(line.split()[1] != str(os.getpid()) for line in lines)
    assert results[4].status == "error" and f"after {results[4].worker_pid}" in lines  # after a raise too


def test_before_child_raising_skips_the_tool_and_after_child(make_executor, mode, tmp_path):
    marker = tmp_path / "after-ran"

    def before() -> None:
        raise ConnectionError("database unreachable")

    def after() -> None:
        marker.write_text("ran")

    ex = make_executor(mode=mode, before_child=before, after_child=after)
    [r] = ex.run([ToolCall("h", "hang", {"marker": str(tmp_path / "tool-ran")})])
    assert r.status == "error" and r.error.type == "ConnectionError"
    assert "before_child" in r.error.message and "database unreachable" in r.error.message
    assert not marker.exists() and not (tmp_path / "tool-ran").exists()


def test_after_child_raising_turns_the_result_into_an_error(make_executor, mode):
    def after() -> None:
        raise RuntimeError("could not close the connection")

    ex = make_executor(mode=mode, after_child=after)
    [r] = ex.run([ToolCall("a", "add", {"a": 1, "b": 2})])
    assert r.status == "error" and "after_child" in r.error.message and "could not close" in r.error.message


def test_on_worker_start_runs_once_per_ray_worker_process(make_executor, mode, tmp_path):
    starts = tmp_path / "starts"

    def on_start() -> None:
        with starts.open("a") as f:
            f.write(f"{os.getpid()}\n")

    ex = make_executor(mode=mode, on_worker_start=on_start)
    first = ex.run([ToolCall(f"a{i}", "whoami", {}) for i in range(8)])
    second = ex.run([ToolCall(f"b{i}", "whoami", {}) for i in range(8)])
    started = starts.read_text().split()
    assert len(started) == len(set(started))  # once per process, not per call
    assert {str(r.output.data) for r in first + second} <= set(started)


def test_on_worker_start_failing_fails_the_calls_naming_the_hook(make_executor, mode):
    def on_start() -> None:
        raise OSError("no credentials on this node")

    ex = make_executor(mode=mode, on_worker_start=on_start)
    results = ex.run([ToolCall(str(i), "add", {"a": i, "b": 1}) for i in range(3)])
    assert all(r.status == "error" and "on_worker_start" in r.error.message and "no credentials" in r.error.message
               for r in results)


def test_the_context_snapshot_reaches_the_worker(make_executor, mode):
    @tool
    def read_context(key: str, runtime: ToolRuntime) -> str:
        """Return a value of the host's context as the call saw it."""
        return str(runtime.context.get(key))

    ex = make_executor([read_context, T.set_ctx], mode=mode)
    ex.run([ToolCall("s", "set_ctx", {"key": "user", "value": 7, "delay": 0.0})])
    assert ex.context == {"user": 7}
    [r] = ex.run([ToolCall("r", "read_context", {"key": "user"})])
    assert r.output.as_text() == "7"


# ----------------------------------------------------------------------------- progress


def test_progress_reaches_the_host_while_the_call_still_runs(make_executor, mode, tmp_path):
    release = tmp_path / "release"

    @tool
    def wait_for_host(path: str, runtime: ToolRuntime) -> str:
        """Report progress, then wait until the host reacts to it (it writes ``path``)."""
        runtime.emit_progress("waiting")
        end = time.monotonic() + 20
        while time.monotonic() < end:
            if Path(path).exists():
                return "released"
            time.sleep(0.01)
        return "the host never saw the progress"

    ex = make_executor([wait_for_host], mode=mode)
    kinds = []
    for event in ex.stream([ToolCall("w", "wait_for_host", {"path": str(release)})]):
        kinds.append(type(event).__name__)
        if isinstance(event, CallProgress):
            assert event.value == "waiting"
            release.write_text("go")  # only a live progress event can unblock the call
        if isinstance(event, CallFinished):
            assert event.result.output.as_text() == "released"
    assert kinds == ["CallStarted", "CallProgress", "CallFinished"]


def test_many_progress_values_keep_their_order(make_executor, mode):
    ex = make_executor(mode=mode)
    events = list(ex.stream([ToolCall("p", "progress", {"steps": 40, "pause": 0.0}),
                             ToolCall("q", "progress", {"steps": 5, "pause": 0.0})]))
    for cid, steps in (("p", 40), ("q", 5)):
        values = [e.value["step"] for e in events if isinstance(e, CallProgress) and e.call_id == cid]
        assert values == list(range(steps))
        finished = next(n for n, e in enumerate(events) if isinstance(e, CallFinished) and e.call_id == cid)
        assert all(n < finished for n, e in enumerate(events) if isinstance(e, CallProgress) and e.call_id == cid)


# ----------------------------------------------------------------------------- timeouts


def test_timeout_interrupts_the_tool_and_its_worker_exits_with_its_children(make_executor, mode, tmp_path):
    marker, child_file = tmp_path / "finally", tmp_path / "child.pid"
    # The deadline counts from the task's start, the tool's import included: on a loaded machine a
    # fresh Ray worker can take seconds to reach the tool's body, so the timeout leaves room for that,
    # and the test asserts what happened, not how fast.
    ex = make_executor(mode=mode, kill_grace=5.0)
    results = ex.run([
        ToolCall("stuck", "hang", {"marker": str(marker), "child_pid_file": str(child_file)}, timeout=6.0),
        ToolCall("quick", "add", {"a": 1, "b": 2}),
    ])
    assert [r.status for r in results] == ["timeout", "ok"]
    assert "timeout of 6.0s" in results[0].error.message and results[0].duration_s >= 6.0
    stuck_pid = results[0].worker_pid
    assert stuck_pid is not None and stuck_pid != os.getpid()
    end = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert marker.read_text() == "finally ran"  # the KeyboardInterrupt of ray.cancel(force=False)
    assert _pid_gone(stuck_pid) and _pid_gone(int(child_file.read_text()))
    again = ex.run([ToolCall(str(i), "add", {"a": 1, "b": i}) for i in range(6)])
    assert [r.output.data for r in again] == [1, 2, 3, 4, 5, 6]


def test_worker_is_force_killed_after_the_grace_when_the_tool_does_not_return(make_executor, mode):
    @tool
    def stuck_in_c() -> str:
        """One long C call: a KeyboardInterrupt cannot be raised until it returns."""
        time.sleep(600)
        return "never"

    ex = make_executor([stuck_in_c, T.add], mode=mode, kill_grace=0.3)
    [r, ok] = ex.run([ToolCall("s", "stuck_in_c", {}, timeout=0.3), ToolCall("a", "add", {"a": 2, "b": 2})])
    assert r.status == "timeout" and ok.output.data == 4
    assert _pid_gone(r.worker_pid)  # ray.cancel(force=True) killed it


def test_a_call_waiting_for_a_cpu_is_not_timed_out_for_the_wait(make_executor, mode):
    # 20 calls of 0.4 s on 2 CPUs run in 10 waves: the last starts >= 3.6 s after submission and would
    # pass a 3.5 s deadline counted from submission. Deadlines count from the start of each task, so each
    # has 3.1 s to spare: room for a loaded machine, where a fresh Ray worker may take a second or more
    # to load the tool's module before the call itself begins (that load is inside the deadline).
    ex = make_executor(mode=mode, workers=10 * RAY_CPUS)
    results = ex.run([ToolCall(str(i), "sleep_for", {"seconds": 0.4, "value": str(i)}, timeout=3.5)
                      for i in range(10 * RAY_CPUS)])
    assert [r.status for r in results] == ["ok"] * (10 * RAY_CPUS), [(r.status, r.duration_s) for r in results]


# ----------------------------------------------------------------------------- crashes


def test_crashes_fail_only_their_own_calls(make_executor, mode):
    ex = make_executor(mode=mode)
    calls = [ToolCall("before", "sleep_for", {"seconds": 0.2, "value": "b"}),
             ToolCall("exit", "exit_now", {"code": 7}),
             ToolCall("segv", "segfault", {}),
             ToolCall("kill", "kill_self", {}),
             *[ToolCall(f"q{i}", "add", {"a": i, "b": 1}) for i in range(5)]]
    results = ex.run(calls)
    for r, name in zip(results[1:4], ("exit_now", "segfault", "kill_self"), strict=True):
        assert r.status == "crashed" and r.error.type == "WorkerCrashed"
        assert f"tool '{name}' crashed" in r.error.message and "worker process died" in r.error.message
    assert results[0].status == "ok" and results[0].output.as_text() == "b"
    assert [r.output.data for r in results[4:]] == [1, 2, 3, 4, 5]


def test_sys_exit_in_a_tool_is_an_error_of_that_call(make_executor, mode):
    """As in every mode (``invoke.py``): an error naming SystemExit and its code; the worker goes on."""
    @tool
    def leave(code: int) -> str:
        """Call sys.exit, as a script turned into a tool might."""
        sys.exit(code)

    ex = make_executor([leave, T.add], mode=mode)
    [r, ok] = ex.run([ToolCall("x", "leave", {"code": 4}), ToolCall("a", "add", {"a": 1, "b": 1})])
    assert r.status == "error" and r.error.type == "SystemExit" and "sys.exit(4)" in r.error.message
    assert ok.output.data == 2


def test_ray_never_retries_a_crashed_call_only_the_tools_retries_do(make_executor, mode, tmp_path):
    @tool(retries=2)
    def retried(counter_file: str, succeed_on: int) -> int:
        """Crash until the attempt number reaches ``succeed_on``."""
        return T.count_attempts.invoke({"counter_file": counter_file, "succeed_on": succeed_on}).data

    ex = make_executor([retried, T.count_attempts], mode=mode)
    a, b = ex.run([
        ToolCall("r", "retried", {"counter_file": str(tmp_path / "r"), "succeed_on": 3}),
        ToolCall("n", "count_attempts", {"counter_file": str(tmp_path / "n"), "succeed_on": 2}),
    ])
    assert a.status == "ok" and a.output.data == 3
    assert b.status == "crashed" and (tmp_path / "n").read_text() == "1"  # Ray's max_retries is 0


# ----------------------------------------------------------------------------- serialization


def test_a_tool_that_cannot_be_pickled_is_refused_naming_it(make_executor, mode):
    lock = threading.Lock()

    @tool
    def locked(x: int) -> int:
        """Holds a lock in its closure: it cannot reach another process."""
        with lock:
            return x

    with pytest.raises(TypeError, match=r"tool 'locked' cannot be sent to Ray workers.*lock"):
        make_executor([locked, T.add], mode=mode)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        @tool
        def connected(x: int) -> int:
            """Holds an open socket in its closure."""
            return sock.fileno() + x

        with pytest.raises(TypeError, match=r"tool 'connected' cannot be sent to Ray workers.*socket"):
            make_executor([connected], mode=mode)

        ex = make_executor([T.add], mode=mode)  # the same refusal when the tool is added later
        with pytest.raises(TypeError, match="tool 'connected'"):
            ex.add_tools(connected)
        assert "connected" not in ex.tools
        assert ex.run([ToolCall("a", "add", {"a": 1, "b": 2})])[0].output.data == 3
    finally:
        sock.close()


def test_an_inline_tool_is_never_pickled(make_executor, mode):
    lock = threading.Lock()

    @tool(inline=True)
    def host_only(x: int) -> int:
        """Runs in the host, so its lock never has to cross to a worker."""
        with lock:
            return x * 2

    ex = make_executor([host_only, T.add], mode=mode)
    assert [r.output.data for r in ex.run([ToolCall("h", "host_only", {"x": 4}),
                                           ToolCall("a", "add", {"a": 1, "b": 1})])] == [8, 2]


def test_a_hook_that_cannot_be_pickled_is_refused_naming_it(make_executor, mode):
    lock = threading.Lock()

    def guarded_reset() -> None:
        with lock:
            pass

    with pytest.raises(TypeError, match=r"before_child hook .*guarded_reset.* cannot be sent to Ray"):
        make_executor(mode=mode, before_child=guarded_reset)


def test_arguments_that_cannot_be_pickled_fail_their_call_only(make_executor, mode):
    ex = make_executor(mode=mode)
    bad, good = ex.run([ToolCall("bad", "add", {"a": threading.Lock(), "b": 1}),
                        ToolCall("good", "add", {"a": 1, "b": 1})])
    assert bad.status == "error" and "could not be submitted to Ray" in bad.error.message
    assert "'bad'" in bad.error.message
    assert good.output.data == 2


def test_a_tool_whose_module_is_missing_on_the_node_fails_its_calls_saying_so(make_executor, mode, tmp_path,
                                                                               monkeypatch):
    # A helper module only the host can import (its directory joins sys.path after Ray started).
    import importlib

    name = f"host_only_helper_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text("FACTOR = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    helper = importlib.import_module(name)
    try:
        @tool
        def triple(x: int) -> int:
            """Uses the helper module, which the function's pickle refers to by name."""
            return x * helper.FACTOR

        assert triple.invoke({"x": 2}).data == 6  # fine in the host
        ex = make_executor([triple, T.add], mode=mode)
        r, ok = ex.run([ToolCall("t", "triple", {"x": 2}), ToolCall("a", "add", {"a": 1, "b": 1})])
    finally:
        sys.modules.pop(name, None)
    assert r.status == "error" and "could not be loaded on the Ray worker" in r.error.message
    assert name in r.error.message and "installed on every node" in r.error.message
    assert ok.output.data == 2


def test_hundred_megabyte_result_comes_back_whole(make_executor, mode):
    ex = make_executor(mode=mode)
    n = 100 * 1024 * 1024
    [r, s] = ex.run([ToolCall("big", "big", {"n": n}), ToolCall("small", "add", {"a": 1, "b": 1})])
    assert r.status == "ok"
    text = r.output.as_text()
    assert len(text) == n and text[:3] == "xxx" and text[-3:] == "xxx"
    assert s.output.data == 2


# ----------------------------------------------------------------------------- live sources


def test_a_live_source_that_waits_first_still_gets_its_calls_run(make_executor, mode):
    def calls():
        yield WAIT  # the client has not written its first line yet
        yield ToolCall("a", "add", {"a": 1, "b": 2})

    ex = make_executor(mode=mode)
    assert [r.output.data for r in ex.imap(calls())] == [3]


def test_a_call_a_live_source_gives_later_runs_while_an_earlier_one_still_runs(make_executor, mode, tmp_path):
    """The source has nothing at first (WAIT), then gets a call and writes to its wake-up pipe: that
    call must start at once, while the first still runs; the first only ends once the second did."""
    release = tmp_path / "release"
    arrived = threading.Event()
    wake_r, wake_w = os.pipe()

    @tool
    def wait_for_file(path: str) -> str:
        """Wait (at most 90 s: a loaded machine starts Ray's worker for the second call slowly) until
        ``path`` exists."""
        end = time.monotonic() + 90
        while time.monotonic() < end:
            if Path(path).exists():
                return "released"
            time.sleep(0.01)
        return "never released"

    def calls():
        yield ToolCall("slow", "wait_for_file", {"path": str(release)})
        while not arrived.is_set():
            yield WAIT
        yield ToolCall("quick", "add", {"a": 2, "b": 2})

    def client() -> None:  # the other side of a co-process, writing its next line a bit later
        time.sleep(0.3)
        arrived.set()
        os.write(wake_w, b"x")

    ex = make_executor([wait_for_file, T.add], mode=mode)
    feeder = threading.Thread(target=client)
    feeder.start()
    order = []
    try:
        for r in ex.imap_unordered(calls(), wakeup_fd=wake_r):
            order.append((r.call_id, r.output.data if r.call_id == "quick" else r.output.as_text()))
            if r.call_id == "quick":
                release.write_text("go")  # only now may the slow call end
    finally:
        feeder.join()
        os.close(wake_r)
        os.close(wake_w)
    assert order == [("quick", 4), ("slow", "released")]


# ----------------------------------------------------------------------------- lifecycle


def test_stopping_a_stream_early_stops_the_running_task(make_executor, mode, tmp_path):
    marker, child_file = tmp_path / "finally", tmp_path / "child.pid"
    ex = make_executor(mode=mode, kill_grace=5.0)
    stream = ex.stream([ToolCall("h", "hang", {"marker": str(marker), "child_pid_file": str(child_file)})])
    assert isinstance(next(stream), CallStarted)
    end = time.monotonic() + 20
    while not (child_file.exists() and child_file.read_text()) and time.monotonic() < end:
        time.sleep(0.02)
    stream.close()  # the consumer walks away while the call runs
    while not marker.exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert marker.read_text() == "finally ran"
    assert _pid_gone(int(child_file.read_text()))
    assert ex.run([ToolCall("a", "add", {"a": 2, "b": 3})])[0].output.data == 5


# ----------------------------------------------------------------------------- caps and rate limits


def _spans(results) -> list[tuple[float, float]]:
    return sorted(tuple(float(x) for x in r.output.as_text().split()) for r in results)


def test_a_cap_holds_across_the_ray_tasks_and_free_calls_are_not_held_behind_it(make_executor, mode):
    capped = copy.copy(T.span).configure(max_concurrency=1)
    ex = make_executor([capped, T.add], mode=mode, workers=4)
    calls = [ToolCall(f"s{i}", "span", {"seconds": 0.4}) for i in range(3)]
    calls += [ToolCall(f"a{i}", "add", {"a": i, "b": 1}) for i in range(3)]
    results = ex.run(calls)
    assert [r.call_id for r in results] == [c.id for c in calls] and all(r.ok for r in results), results
    spans = _spans(results[:3])
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - 0.05, f"two calls of a max_concurrency=1 tool overlapped on Ray: {spans}"
    assert [r.output.data for r in results[3:]] == [1, 2, 3]


def test_a_rate_limit_spaces_the_ray_tasks(make_executor, mode):
    rated = copy.copy(T.span).configure(rate_limit="5/s")
    ex = make_executor([rated], mode=mode, workers=4)
    results = ex.run([ToolCall(f"r{i}", "span", {"seconds": 0.0}) for i in range(6)])
    starts = sorted(start for start, _ in _spans(results))
    assert starts[-1] - starts[0] >= 0.8, starts  # six calls at 5/s: five intervals of 0.2 s


@tool
def hold(directory: str, name: str, seconds: float) -> str:
    """Arrive in ``directory``, then hold a CPU for ``seconds``; return "start end" (wall clock)."""
    start = time.time()
    Path(directory, name).touch()
    time.sleep(seconds)
    return f"{start:.4f} {time.time():.4f}"


def test_a_rate_limit_spaces_the_starts_of_the_tools_when_ray_holds_their_tasks_back(
        make_executor, mode, tmp_path):
    """Another executor's calls hold every CPU of the cluster, so the rated calls' tasks, admitted 0.5 s
    apart, wait in Ray and get their CPUs at once: the tool still starts 0.5 s apart (stamped inside it).

    No rated task can run before the first blocker ends, and the sink lets their tokens out 0.5 s
    apart from there, so the k-th start is at least k intervals after the first blocker's end. A start
    is never early, only late (a loaded machine delays Ray's reply with the token), so this bound holds
    under any load. Tokens taken when the driver admits the calls would fail it: the three tasks would
    then start together when the blockers end."""
    blocker = make_executor([hold], mode=mode, workers=RAY_CPUS, ray_options={"num_cpus": 1})
    rated = copy.copy(T.span).configure(rate_limit="2/s")
    ex = make_executor([rated], mode=mode, workers=3, ray_options={"num_cpus": 1})
    ex.run([ToolCall("warm", "span", {"seconds": 0.0})])  # the sink and the tool are on the cluster
    time.sleep(0.6)  # the warm-up call's token is long past
    busy = [blocker.submit(ToolCall(f"b{i}", "hold", {"directory": str(tmp_path), "name": f"b{i}",
                                                      "seconds": 3.0}))
            for i in range(RAY_CPUS)]
    end = time.monotonic() + 90  # Ray starts worker processes slowly on a loaded machine
    while len(os.listdir(tmp_path)) < RAY_CPUS and time.monotonic() < end:
        time.sleep(0.01)
    assert len(os.listdir(tmp_path)) == RAY_CPUS, "the blockers never all started"
    results = ex.run([ToolCall(f"r{i}", "span", {"seconds": 0.0}) for i in range(3)])
    held = [f.result(timeout=60) for f in busy]
    assert all(r.ok for r in held), held
    assert all(r.ok for r in results), results
    first_free = min(end for _, end in _spans(held))
    starts = sorted(start for start, _ in _spans(results))
    # 10 ms for the 4-digit stamps and the order of a blocker's stamp and its CPU's release
    floors = [first_free + 0.5 * k - 0.01 for k in range(3)]
    assert all(s >= f for s, f in zip(starts, floors, strict=True)), (
        f"calls of a 2/s tool started {[round(s - first_free, 3) for s in starts]} s after the first "
        "CPU was free on Ray; each must be at least one interval after the one before")


def test_the_sink_spaces_the_tokens_of_tasks_that_ask_at_once():
    """The actor's side of the above, without a cluster: three tasks asking at the same instant are let
    go one interval apart, and another executor's (another channel's) tool has a bucket of its own."""
    import asyncio

    from toolfork.executor.backends.ray_task import Sink

    async def main() -> tuple[list[float], float]:
        sink = Sink()
        t0 = time.monotonic()

        async def take(channel: str) -> float:
            await sink.token(channel, "span", 4.0, 1)
            return time.monotonic() - t0

        *same, other = await asyncio.gather(take("a"), take("a"), take("a"), take("b"))
        return sorted(same), other

    same, other = asyncio.run(main())
    assert same[1] >= 0.24 and same[2] >= 0.49, same  # lower bounds only: a loaded machine is late, never early
    assert other < same[2]  # not queued behind channel a's tokens


def test_the_message_actor_outlives_its_executor_for_the_next_one(mode):
    """The sink is one per driver connection: the next Executor (an agent that makes one per turn) uses
    the same actor, alive, rather than paying another actor process's start."""
    first = Executor([T.add], mode=mode, workers=2, timeout=30)  # a deadline: every call reports its start
    assert first.run([ToolCall("a", "add", {"a": 1, "b": 2})])[0].ok
    sink = ray_connection._sink
    first.close()
    assert sink is not None and ray_connection._sink is sink
    second = Executor([T.add], mode=mode, workers=2, timeout=30)
    try:
        [result] = second.run([ToolCall("b", "add", {"a": 2, "b": 2})])
        assert result.ok and result.output.data == 4, result
        assert ray_connection._sink is sink
    finally:
        second.close()
    import ray

    assert ray.get(sink.ping.remote(), timeout=30) is True  # alive after both closed


@pytest.mark.timeout(300)  # two Ray connections on a loaded machine
def test_a_program_that_connects_to_ray_again_gets_a_new_message_actor(ray_cluster):  # noqa: F811
    """The sink is kept across executors of one driver connection, never across two: after the program's
    ``ray.shutdown()`` and ``ray.init()`` (a new job on the same cluster), a call with a deadline (which
    reports its start through the sink) still runs, through a sink of the new connection."""
    address = ray_cluster.get_runtime_context().gcs_address
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        import ray
        from tests.executor import tools_for_tests as T
        from toolfork.executor import Executor, ToolCall
        from toolfork.executor.backends import ray_connection

        answers, sinks = [], []
        for round_ in range(2):
            ray.init(address={address!r}, log_to_driver=False)
            with Executor([T.add], mode="ray", workers=1, timeout=60) as ex:
                [r] = ex.run([ToolCall("a", "add", {{"a": round_, "b": 40}})])
                answers.append(r.output.data if r.ok else repr(r.error))
            sinks.append(ray_connection._sink._actor_id.hex())  # the actor, not the handle object
            ray.shutdown()
        print(json.dumps({{"answers": answers, "sinks": sinks}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["answers"] == [40, 41]
    first, second = report["sinks"]
    assert first != second  # a new connection, a new sink (kept within one: the test above)


def test_limits_are_refused_in_ray_mode_naming_why(mode):
    from toolfork import Limits, LimitsNotEnforceable

    limited = copy.copy(T.add).configure(limits=Limits(memory_mb=64))
    with pytest.raises(LimitsNotEnforceable, match=r"tool 'add': memory_mb=64 cannot be enforced here: Ray mode"):
        Executor([limited], mode=mode)


def test_closing_leaves_a_ray_the_program_started_running(mode, ray_cluster):  # noqa: F811
    with Executor([T.add], mode=mode, workers=2) as ex:
        assert ex.run([ToolCall("a", "add", {"a": 1, "b": 1})])[0].output.data == 2
    assert ray_cluster.is_initialized() and not ray_connection.started_by_toolfork()
    assert ray_cluster.get(ray_cluster.put("still up")) == "still up"


def test_missing_ray_is_an_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` does when it is not installed
    with pytest.raises(ImportError, match=r"pip install 'toolfork\[ray\]'"):
        Executor([T.add], mode="ray")


@pytest.mark.parametrize("address", ["", "   ", 8265])
def test_a_bad_address_is_refused(mode, address):
    with pytest.raises(ValueError, match="address must be"):
        Executor([T.add], mode=mode, address=address)


@tool
def rendezvous(directory: str, name: str, expected: int) -> bool:
    """Arrive, then wait (up to 90 s: Ray starts a few worker processes at a time, slowly on a loaded
    machine) until ``expected`` calls have arrived: only calls that run at the same time can all meet."""
    Path(directory, name).touch()
    end = time.monotonic() + 90
    while time.monotonic() < end:
        if len(os.listdir(directory)) >= expected:
            return True
        time.sleep(0.02)
    return False


def test_workers_calls_run_at_once_on_fewer_cpus(make_executor, mode, tmp_path):
    """Each task asks for a share of the cluster's CPUs, so ``workers`` I/O-bound calls overlap even
    on a 2-CPU cluster (with Ray's default of one CPU a task, only two would run at a time)."""
    ex = make_executor([rendezvous], mode=mode, workers=6)
    results = ex.run([ToolCall(str(i), "rendezvous", {"directory": str(tmp_path), "name": str(i), "expected": 6})
                      for i in range(6)])
    assert [r.output.data for r in results] == [True] * 6  # all six were running together


# ----------------------------------------------------------------------------- concurrent batches on Ray


@tool
def count_in_flight(directory: str, name: str, seconds: float = 0.2) -> int:
    """Be present in ``directory`` for ``seconds``; return how many calls were present at the end."""
    me = Path(directory, name)
    me.touch()
    try:
        time.sleep(seconds)
        return len(os.listdir(directory))
    finally:
        me.unlink()


@tool
def stubborn(pid_file: str) -> str:
    """Record the worker's pid, then ignore the interrupt Ray sends: only a kill stops this call."""
    Path(pid_file).write_text(str(os.getpid()))
    while True:
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:
            pass


_concurrently = _contract._threads


def test_concurrent_batches_share_the_workers_limit(make_executor, mode, tmp_path):
    """``workers`` bounds the tasks in flight for the whole executor, not per batch."""
    ex = make_executor([count_in_flight], mode=mode, workers=2)

    def batch(tag):
        return ex.run([ToolCall(f"{tag}{i}", "count_in_flight", {"directory": str(tmp_path), "name": f"{tag}{i}"})
                       for i in range(4)])

    results = _concurrently(*[lambda t=t: batch(t) for t in "abc"])
    counts = [r.output.data for rs in results for r in rs]
    assert len(counts) == 12 and all(1 <= c <= 2 for c in counts), counts


def test_an_abandoned_stream_stops_its_task_while_another_batch_runs_on(make_executor, mode, tmp_path):
    marker, gate, child_file = tmp_path / "finally", tmp_path / "gate", tmp_path / "child.pid"
    ex = make_executor(mode=mode, workers=2, kill_grace=5.0)
    started = threading.Event()

    def walk_away():
        stream = ex.stream([ToolCall("h", "hang", {"marker": str(marker), "child_pid_file": str(child_file)})])
        assert isinstance(next(stream), CallStarted)
        started.set()
        end = time.monotonic() + 20
        while not (child_file.exists() and child_file.read_text()) and time.monotonic() < end:
            time.sleep(0.02)  # the tool runs in its worker
        stream.close()

    def other():
        assert started.wait(30)
        return ex.run([ToolCall("w", "wait_for_file", {"path": str(gate), "limit": 20.0})])

    def release():
        end = time.monotonic() + 20
        while not marker.exists() and time.monotonic() < end:
            time.sleep(0.02)
        gate.write_text("go")  # only once the abandoned call has been stopped

    _, results, _ = _concurrently(walk_away, other, release)
    assert marker.read_text() == "finally ran"
    assert _pid_gone(int(child_file.read_text()))
    assert [r.status for r in results] == ["ok"] and results[0].output.data is True


def test_close_while_batches_run_in_threads_leaves_no_task_running(mode, ray_cluster, tmp_path):  # noqa: F811
    """Every batch gets "cancelled"; a tool that ignores the interrupt is killed after the grace;
    close() has Ray kill the workers that ran the calls."""
    ex = Executor([T.hang, stubborn, T.add], mode=mode, workers=3, kill_grace=0.5)
    out: dict[str, list] = {"a": [], "b": []}
    pid_files = {"a": tmp_path / "a.pid", "b": tmp_path / "b.pid"}

    def runner(tag, call):
        for event in ex.stream([call, ToolCall(f"{tag}-q", "add", {"a": 1, "b": 1})]):
            if isinstance(event, CallFinished):
                out[tag].append(event.result)

    threads = [
        threading.Thread(target=runner, args=("a", ToolCall("a", "stubborn", {"pid_file": str(pid_files["a"])}))),
        threading.Thread(target=runner, args=("b", ToolCall("b", "hang", {"marker": str(tmp_path / "m"),
                                                                            "child_pid_file": str(pid_files["b"])}))),
    ]
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + 30
        while not all(f.exists() and f.read_text() for f in pid_files.values()) and time.monotonic() < end:
            time.sleep(0.02)
        stubborn_pid, child_pid = (int(f.read_text()) for f in pid_files.values())
    finally:
        ex.close()
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    assert {r.call_id: r.status for r in out["a"]}["a"] == "cancelled"
    assert {r.call_id: r.status for r in out["b"]}["b"] == "cancelled"
    assert (tmp_path / "m").read_text() == "finally ran"
    # Killed at close(): nothing else would end it. Ray kills a force-cancelled task's worker on its own
    # time (close() waits up to KILL_WAIT_S for it to say so); beside busy CPUs that took over 2 s.
    assert _pid_gone(stubborn_pid, 10.0)
    assert _pid_gone(child_pid)
    assert ray_cluster.is_initialized()  # a Ray the program started is left running


def test_a_one_call_batch_joining_a_busy_driver_starts_at_once(make_executor, mode, tmp_path):
    """A batch whose calls arrive while another thread drives gets its call started without waiting for
    the driver's batch: the driver's wait is interrupted (or polled), never blocked on a long call."""
    ex = make_executor(mode=mode, workers=2)
    gate = tmp_path / "gate"
    started = threading.Event()

    def long_batch():
        for event in ex.stream([ToolCall("long", "wait_for_file", {"path": str(gate), "limit": 30.0},
                                         timeout=60)]):
            if isinstance(event, CallStarted):
                started.set()
        return True

    def joiner():
        assert started.wait(30)
        r = ex.run([ToolCall("j", "add", {"a": 2, "b": 3})])
        gate.write_text("go")  # the long call may only end after the joiner's call finished
        return r

    _, joined = _concurrently(long_batch, joiner)
    assert joined[0].output.data == 5


def test_cancels_racing_completions_across_threads_never_misroute_a_result(make_executor, mode):
    from tests.redteam.test_host_hardening import race_cancels_and_completions

    race_cancels_and_completions(make_executor(mode=mode, workers=2), submitters=2, calls=10, batchers=1,
                                 batches=3)


def test_a_tools_ceiling_bounds_its_result_and_progress_on_ray_workers(make_executor, mode):
    """max_result_mb in Ray mode: measured in the Ray worker on what Ray would send the host."""
    from tests.executor.test_ceiling import big_progress, big_text
    from toolfork import Tool

    tools = [Tool("small", fn=big_text, max_result_mb=1), Tool("roomy", fn=big_text),
             Tool("chatty", fn=big_progress, max_result_mb=1)]
    ex = make_executor(tools, mode=mode)
    over, fits, after, chatty = ex.run([
        ToolCall("a", "small", {"n": 3_000_000}), ToolCall("b", "roomy", {"n": 3_000_000}),
        ToolCall("c", "small", {"n": 10}), ToolCall("d", "chatty", {"n": 3_000_000})])
    assert over.status == "error" and over.error.type == "ResultTooLarge", over
    assert "over the ceiling of 1 MB" in over.error.message
    assert fits.ok and len(fits.output.content[0].text) == 3_000_000
    assert after.ok
    assert chatty.status == "error" and chatty.error.type == "ResultTooLarge", chatty
    assert "progress" in chatty.error.message, chatty
