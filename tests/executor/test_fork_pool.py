"""What only a real process boundary can give: hooks in the child, kills, crash isolation, big payloads."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from tests.executor import tools_for_tests as T
from tests.procs import gone
from toolfork.executor import ToolCall
from toolfork.tools import ToolRuntime, tool


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    return gone(pid, seconds)


def test_calls_run_in_worker_processes_that_stay_warm(make_executor):
    ex = make_executor(mode="fork", workers=2)
    pids = {r.output.data for r in ex.run([ToolCall(str(i), "whoami", {}) for i in range(8)])}
    assert os.getpid() not in pids and pids <= set(ex.backend.worker_pids)
    again = {r.output.data for r in ex.run([ToolCall(str(i), "whoami", {}) for i in range(8)])}
    assert again <= set(ex.backend.worker_pids) and again & pids  # same warm workers


def test_idle_workers_sleep_on_their_pipes_after_looking_briefly(make_executor):
    """A worker looks for its next frame a few microseconds before it sleeps: an idle pool's workers
    sleep, and use no CPU while they do."""
    ex = make_executor(mode="fork", workers=2)
    for _ in range(3):
        assert all(r.ok for r in ex.run([ToolCall(str(i), "whoami", {}) for i in range(8)]))
    workers = [psutil.Process(pid) for pid in ex.backend.worker_pids]
    deadline = time.monotonic() + 10
    while any(w.status() != psutil.STATUS_SLEEPING for w in workers):
        assert time.monotonic() < deadline, [w.status() for w in workers]
        time.sleep(0.05)
    before = [sum(w.cpu_times()[:2]) for w in workers]
    time.sleep(0.5)
    assert [sum(w.cpu_times()[:2]) for w in workers] == before


def test_hooks_run_in_the_child_around_every_call(make_executor, tmp_path):
    log = tmp_path / "hooks.log"

    def before() -> None:
        with log.open("a") as f:
            f.write(f"before {os.getpid()}\n")

    def after() -> None:
        with log.open("a") as f:
            f.write(f"after {os.getpid()}\n")

    ex = make_executor(mode="fork", before_child=before, after_child=after)
    results = ex.run([ToolCall(str(i), "whoami", {}) for i in range(4)] +
                     [ToolCall("f", "fail", {"message": "x"})])
    lines = log.read_text().splitlines()
    assert len(lines) == 10
    for r in results[:4]:
        assert f"before {r.output.data}" in lines and f"after {r.output.data}" in lines
    assert all(line.split()[1] != str(os.getpid()) for line in lines)
    assert lines.count(f"after {results[4].worker_pid}") >= 1  # after_child runs when the tool raised


def test_before_child_raising_skips_the_tool_and_after_child(make_executor, tmp_path):
    marker = tmp_path / "after-ran"

    def before() -> None:
        raise ConnectionError("database unreachable")

    def after() -> None:
        marker.write_text("ran")

    ex = make_executor(mode="fork", before_child=before, after_child=after)
    [r] = ex.run([ToolCall("h", "hang", {"marker": str(tmp_path / "tool-ran")})])
    assert r.status == "error" and "before_child" in r.error.message and "database unreachable" in r.error.message
    assert r.error.type == "ConnectionError"
    assert not marker.exists() and not (tmp_path / "tool-ran").exists()


def test_after_child_raising_turns_the_result_into_an_error(make_executor):
    def after() -> None:
        raise RuntimeError("could not close the connection")

    ex = make_executor(mode="fork", after_child=after)
    [r] = ex.run([ToolCall("a", "add", {"a": 1, "b": 2})])
    assert r.status == "error" and "after_child" in r.error.message and "could not close" in r.error.message


def test_no_hook_runs_in_sequential_mode(make_executor, tmp_path):
    marker = tmp_path / "hook"
    ex = make_executor(mode="sequential", before_child=lambda: marker.write_text("x"),
                       after_child=lambda: marker.write_text("y"))
    assert ex.run([ToolCall("a", "add", {"a": 1, "b": 2})])[0].status == "ok"
    assert not marker.exists()


def test_on_worker_start_runs_once_per_worker(make_executor, tmp_path):
    starts = tmp_path / "starts"

    def on_start() -> None:
        with starts.open("a") as f:
            f.write(f"{os.getpid()}\n")

    ex = make_executor(mode="fork", workers=2, on_worker_start=on_start)
    ex.run([ToolCall(str(i), "add", {"a": i, "b": 1}) for i in range(10)])
    ex.run([ToolCall("crash", "exit_now", {"code": 3})])  # replaced worker runs it too
    ex.run([ToolCall(str(i), "whoami", {}) for i in range(4)])
    end = time.monotonic() + 5
    while len(starts.read_text().split()) < 3 and time.monotonic() < end:
        time.sleep(0.02)  # the replacement runs its start hook as soon as it is forked
    pids = starts.read_text().split()
    assert len(pids) == len(set(pids)) == 3


def test_timeout_kills_the_worker_its_children_and_runs_finally(make_executor, tmp_path):
    marker, child_file = tmp_path / "finally", tmp_path / "child.pid"
    ex = make_executor(mode="fork", workers=2, kill_grace=2.0)
    before = set(ex.backend.worker_pids)
    results = ex.run([
        ToolCall("stuck", "hang", {"marker": str(marker), "child_pid_file": str(child_file)}, timeout=0.5),
        ToolCall("quick", "add", {"a": 1, "b": 2}),
    ])
    assert [r.status for r in results] == ["timeout", "ok"]
    assert "timeout of 0.5s" in results[0].error.message and results[0].duration_s >= 0.5
    stuck_pid = results[0].worker_pid
    assert _wait_gone(stuck_pid) and _wait_gone(int(child_file.read_text()))
    deadline = time.monotonic() + 3
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.read_text() == "finally ran"  # SIGTERM raised inside the tool
    assert stuck_pid not in ex.backend.worker_pids and len(ex.backend.worker_pids) == 2
    assert set(ex.backend.worker_pids) != before
    assert [r.status for r in ex.run([ToolCall(str(i), "add", {"a": 1, "b": i}) for i in range(6)])] == ["ok"] * 6


def test_sigkill_after_grace_when_the_tool_ignores_sigterm(make_executor, tmp_path):
    @tool
    def stubborn() -> str:
        """Ignores SIGTERM, as a C extension stuck in a syscall would."""
        import signal as _signal

        _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)
        time.sleep(600)
        return "never"

    ex = make_executor([stubborn, T.add], mode="fork", kill_grace=0.2)
    [r] = ex.run([ToolCall("s", "stubborn", {}, timeout=0.2)])
    assert r.status == "timeout"
    assert _wait_gone(r.worker_pid, 5.0)


@pytest.mark.parametrize(("tool_name", "arguments", "expected"), [
    ("exit_now", {"code": 7}, "exited with code 7"),
    ("segfault", {}, "SIGSEGV"),
    ("kill_self", {}, "SIGKILL"),
])
def test_a_crash_fails_only_its_call(make_executor, tool_name, arguments, expected):
    ex = make_executor(mode="fork", workers=2)
    calls = [ToolCall("before", "sleep_for", {"seconds": 0.2, "value": "b"}),
             ToolCall("crash", tool_name, arguments),
             *[ToolCall(f"q{i}", "add", {"a": i, "b": 1}) for i in range(5)]]
    results = ex.run(calls)
    assert results[1].status == "crashed" and expected in results[1].error.message
    assert results[0].status == "ok" and results[0].output.as_text() == "b"
    assert [r.output.data for r in results[2:]] == [1, 2, 3, 4, 5]
    assert len(ex.backend.worker_pids) == 2 and results[1].worker_pid not in ex.backend.worker_pids


def test_calls_queued_behind_a_crash_in_a_chunk_still_run_once(make_executor, tmp_path):
    ex = make_executor(mode="fork", workers=1)
    ex.run([ToolCall(f"warm{i}", "add", {"a": 1, "b": 1}) for i in range(20)])  # add is now "quick"
    calls = [ToolCall(f"a{i}", "add", {"a": i, "b": 0}) for i in range(10)]
    calls.insert(3, ToolCall("boom", "exit_now", {"code": 2}))
    results = ex.run(calls)
    assert results[3].status == "crashed"
    assert [r.output.data for r in results if r.call_id != "boom"] == list(range(10))


def test_retries_apply_only_when_the_tool_declares_them(make_executor, tmp_path):
    retried = tool(T.count_attempts.fn, name="retried", retries=2) if hasattr(T.count_attempts, "fn") else None
    if retried is None:
        @tool(retries=2)
        def retried(counter_file: str, succeed_on: int) -> int:
            """Crash until the attempt number reaches ``succeed_on``."""
            return T.count_attempts.invoke({"counter_file": counter_file, "succeed_on": succeed_on}).data

    ex = make_executor([retried, T.count_attempts], mode="fork")
    a, b = ex.run([
        ToolCall("r", "retried", {"counter_file": str(tmp_path / "r"), "succeed_on": 3}),
        ToolCall("n", "count_attempts", {"counter_file": str(tmp_path / "n"), "succeed_on": 2}),
    ])
    assert a.status == "ok" and a.output.data == 3
    assert b.status == "crashed" and (tmp_path / "n").read_text() == "1"  # no retry: side effects


def test_hundred_megabyte_result_comes_back_whole(make_executor):
    ex = make_executor(mode="fork")
    n = 100 * 1024 * 1024
    [r, s] = ex.run([ToolCall("big", "big", {"n": n}), ToolCall("small", "add", {"a": 1, "b": 1})])
    assert r.status == "ok"
    text = r.output.as_text()
    assert len(text) == n and text[:3] == "xxx" and text[-3:] == "xxx"
    assert s.output.data == 2


def test_tools_added_after_start_reach_old_and_new_workers(make_executor):
    ex = make_executor([T.add, T.exit_now], mode="fork", workers=2)
    ex.run([ToolCall("w", "add", {"a": 1, "b": 1})])
    factor = 7

    @tool
    def times_factor(x: int) -> int:
        """A closure defined after the pool started."""
        return x * factor

    ex.add_tools(times_factor)
    first = ex.run([ToolCall(str(i), "times_factor", {"x": i}) for i in range(4)])
    assert [r.output.data for r in first] == [0, 7, 14, 21]
    ex.run([ToolCall("crash", "exit_now", {"code": 1})])  # force a replacement from the template
    again = ex.run([ToolCall(str(i), "times_factor", {"x": i}) for i in range(4)])
    assert [r.output.data for r in again] == [0, 7, 14, 21]


def test_slow_call_does_not_hold_up_quick_ones(make_executor):
    ex = make_executor(mode="fork", workers=2)
    ex.run([ToolCall(f"w{i}", "add", {"a": 1, "b": 1}) for i in range(20)])
    calls = [ToolCall("slow", "sleep_for", {"seconds": 1.0})] + [
        ToolCall(f"q{i}", "add", {"a": i, "b": 1}) for i in range(7)]
    order = [e.call_id for e in ex.stream(calls) if type(e).__name__ == "CallFinished"]
    assert order[-1] == "slow"  # all seven quick calls finished first, on the other worker


def test_the_driver_sleeps_through_a_long_call_of_a_tool_known_as_quick(make_executor):
    # The driver polls for a result due within microseconds before it sleeps; a call of a tool whose
    # calls were quick so far, that runs for a second now, must be slept through, not polled for.
    ex = make_executor(mode="fork", workers=2)
    ex.run([ToolCall(f"w{i}", "sleep_for", {"seconds": 0}) for i in range(40)])
    cpu = time.process_time()
    [result] = ex.run([ToolCall("long", "sleep_for", {"seconds": 1.5})])
    assert result.status == "ok"
    assert time.process_time() - cpu < 0.5  # a poll that never stopped would take about 1.5 s of CPU


def test_close_leaves_no_process_and_no_zombie(make_executor):
    ex = make_executor(mode="fork", workers=3)
    ex.run([ToolCall(str(i), "add", {"a": 1, "b": i}) for i in range(6)])
    pids = [*ex.backend.worker_pids, ex.backend.template_pid]
    ex.close()
    ex.close()  # idempotent
    for pid in pids:  # gone, not even a zombie: close() reaped them
        with pytest.raises(psutil.NoSuchProcess):
            psutil.Process(pid).status()
    assert [p for p in psutil.Process().children(recursive=True) if p.pid in pids] == []


@tool
def wait_for_ack(ack_file: str, runtime: ToolRuntime) -> bool:
    """Report progress, then wait (up to 10 s) for the host to acknowledge it by creating a file."""
    runtime.emit_progress("waiting for the host")
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if Path(ack_file).exists():
            return True
        time.sleep(0.01)
    return False


def test_progress_reaches_the_host_while_the_call_runs(make_executor, tmp_path):
    ack = tmp_path / "ack"
    ex = make_executor([wait_for_ack], mode="fork")
    finished = None
    for event in ex.stream([ToolCall("p", "wait_for_ack", {"ack_file": str(ack)})]):
        if type(event).__name__ == "CallProgress":
            assert event.value == "waiting for the host"
            ack.touch()  # the call can only finish after the host saw its progress
        elif type(event).__name__ == "CallFinished":
            finished = event.result
    assert finished is not None and finished.output.data is True


def test_an_exception_that_cannot_be_printed_still_gives_a_result(make_executor):
    class Weird(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str for you")

    @tool
    def raise_weird() -> str:
        """Raises an exception whose __str__ raises."""
        raise Weird()

    ex = make_executor([raise_weird], mode="fork")
    [r] = ex.run([ToolCall("w", "raise_weird", {})])
    assert r.status == "error" and r.error.type == "Weird" and "unprintable" in r.error.message

