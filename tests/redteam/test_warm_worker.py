"""A warm worker starts every call clean, and its channels to the host hold whatever a tool does.

Tools that write into inherited descriptors, close them, emit progress from many threads, leave signal
state or timers behind, leave zombies, or use an Executor built before the fork: each fails (at most)
its own call, and the calls after it run as on a fresh worker."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.redteam import hostile_tools
from tests.redteam.hostile_tools import WARM_TOOLS, fd_inodes
from toolfork.executor import Executor, ToolCall
from toolfork.executor.types import CallFinished, CallProgress
from toolfork.executor.wire import HEADER, MAGIC

BIG = 300_000  # over oob.LARGE_FRAME: a result by memory file over the side socket


def _call(cid: str, name: str, timeout: float | None = None, **arguments: Any) -> ToolCall:
    return ToolCall(cid, name, arguments, timeout=timeout)


def _healthy(ex: Executor, tag: str) -> None:
    """The pool still answers small and large results, whole, on every worker."""
    calls = []
    for i in range(2 * ex.workers):
        calls.append(_call(f"{tag}-e{i}", "echo", text=f"t{i}"))
        calls.append(_call(f"{tag}-b{i}", "big_text", n=BIG + i))
    results = ex.run(calls)
    for i in range(2 * ex.workers):
        small, big = results[2 * i], results[2 * i + 1]
        assert small.status == "ok" and small.output.content[0].text == f"t{i}", small
        assert big.status == "ok" and big.output.content[0].text == "b" * (BIG + i), big.error


# ----------------------------------------------------------------------------- bytes into inherited fds
# "low" is fds 3..20, "all" every fd; of those, the pipes and sockets of the worker that the test
# process did not have before it built the executor (the test runner's own channels are inherited by
# every worker: they are left alone).

@pytest.mark.timeout(120)
def test_bytes_written_into_low_descriptors_do_not_reach_the_channels():
    """A tool (or a native library with a stale fd) writes a forged 2 GiB header into every pipe and
    socket among fds 3..20 and returns: its result comes back, so do the next ones."""
    skip = fd_inodes()  # before the executor: its pipes are the worker's too
    with Executor(WARM_TOOLS, mode="fork", workers=1, timeout=30) as ex:
        [r] = ex.run([_call("s", "scribble", where="low", skip=skip)])
        assert r.status == "ok", r.error
        _healthy(ex, "after")


@pytest.mark.timeout(120)
def test_bytes_written_into_every_descriptor_fail_that_call_alone():
    """Written into every pipe and socket the worker has (its result pipe and side socket included):
    the host sees bytes that are not a frame at once (no 2 GiB wait, no waiting for the timeout), fails
    that call naming it, replaces the worker; the calls around it are untouched."""
    skip = fd_inodes()  # before the executor: its pipes are the worker's too
    with Executor(WARM_TOOLS, mode="fork", workers=1, timeout=60) as ex:
        before = ex.backend.worker_pids
        start = time.monotonic()
        first, bad, after = ex.run([_call("a", "echo", text="x"), _call("s", "scribble", where="all", skip=skip),
                                    _call("b", "echo", text="y")])
        assert time.monotonic() - start < 50  # long before the 60 s timeout: nothing waited for it
        assert first.status == "ok" and after.status == "ok" and after.output.content[0].text == "y"
        assert bad.status == "error" and bad.error.type == "ChannelDamaged", bad
        assert "not a toolfork frame" in bad.error.message and "scribble" in bad.error.message
        assert ex.backend.worker_pids != before
        _healthy(ex, "after")


@pytest.mark.timeout(120)
def test_a_forged_header_with_the_tag_is_bounded_by_the_deadline():
    """A tool that knows the tag and announces a frame it never completes: the read ends at the call's
    deadline (a timeout result), and the worker is replaced."""
    forged = HEADER.pack(MAGIC, 200_000).hex()
    skip = fd_inodes()  # before the executor: its pipes are the worker's too
    with Executor(WARM_TOOLS, mode="fork", workers=1) as ex:
        [r] = ex.run([_call("s", "scribble", timeout=3, where="all", skip=skip, data_hex=forged)])
        assert r.status == "timeout", r
        _healthy(ex, "after")


@pytest.mark.timeout(120)
def test_a_header_over_the_pipes_bound_is_refused_at_once():
    """A tagged header announcing more than a pipe ever carries (large frames go by memory file)."""
    forged = HEADER.pack(MAGIC, 1 << 31).hex()
    skip = fd_inodes()  # before the executor: its pipes are the worker's too
    with Executor(WARM_TOOLS, mode="fork", workers=1) as ex:
        [r] = ex.run([_call("s", "scribble", timeout=60, where="all", skip=skip, data_hex=forged)])
        assert r.status == "error" and r.error.type == "ChannelDamaged", r
        assert "bound" in r.error.message
        _healthy(ex, "after")


# ----------------------------------------------------------------------------- closed channels

@pytest.mark.timeout(120)
def test_a_tool_closing_low_sockets_does_not_poison_its_worker():
    """The case from the field: a tool closes the sockets among fds 3..20; every later large result on
    that warm worker still arrives (the channels sit out of that range)."""
    skip = fd_inodes()  # before the executor: its pipes are the worker's too
    with Executor(WARM_TOOLS, mode="fork", workers=1) as ex:
        [r] = ex.run([_call("c", "close_channels", where="low", skip=skip)])
        assert r.status == "ok", r.error
        _healthy(ex, "after")


@pytest.mark.parametrize("kinds", ["sockets", "pipes and sockets"])
@pytest.mark.timeout(120)
def test_a_tool_closing_its_workers_channels_fails_alone_and_the_worker_is_replaced(kinds):
    """Closing every socket (the side socket) or every pipe too (the result pipe): that call fails,
    naming what happened; the worker is replaced; every later call, large results included, works."""
    skip = fd_inodes()  # before the executor: its pipes are the worker's too
    with Executor(WARM_TOOLS, mode="fork", workers=1) as ex:
        before = ex.backend.worker_pids
        first, bad, after = ex.run([_call("a", "echo", text="x"), _call("c", "close_channels", where="all", skip=skip,
                                                                          kinds=kinds),
                                    _call("b", "big_text", n=BIG)])
        assert first.status == "ok"
        assert bad.status in ("error", "crashed") and bad.status != "ok", bad
        assert "closed or replaced" in bad.error.message, bad.error
        assert after.status == "ok" and len(after.output.content[0].text) == BIG, after.error
        assert ex.backend.worker_pids != before
        _healthy(ex, "after")


# ----------------------------------------------------------------------------- progress from threads

@pytest.mark.timeout(120)
def test_progress_from_many_threads_arrives_whole_and_in_order_per_thread():
    """8 threads emit 50 values each at once, some of them 300 KB (by memory file): every event
    arrives whole, each thread's in its order, and the next batch runs."""
    threads, each = 8, 50
    with Executor(WARM_TOOLS, mode="fork", workers=1, timeout=60) as ex:
        events = list(ex.stream([_call("p", "progress_from_threads", threads=threads, each=each, big_every=7)]))
        values = [e.value for e in events if isinstance(e, CallProgress)]
        [done] = [e.result for e in events if isinstance(e, CallFinished)]
        assert done.status == "ok" and done.output.data == threads * each, done.error
        assert len(values) == threads * each
        for t in range(threads):
            mine = [v for v in values if v["t"] == t]
            assert [v["i"] for v in mine] == list(range(each))
            assert all(v["pad"] == ("p" * 300_000 if v["i"] % 7 == 0 else "") for v in mine)
        _healthy(ex, "after")


# ----------------------------------------------------------------------------- signal state

@pytest.mark.parametrize("what", ["ignore_term", "block_term", "swallow_term"])
@pytest.mark.timeout(120)
def test_a_calls_sigterm_changes_do_not_reach_the_next_calls_timeout(what, tmp_path):
    """A call leaves SIGTERM ignored, blocked or swallowed; the next call's timeout still raises inside
    it (its finally block runs) instead of waiting for the SIGKILL after the grace."""
    mark = tmp_path / "finally"
    with Executor(WARM_TOOLS, mode="fork", workers=1, kill_grace=20.0) as ex:
        first, stuck = ex.run([_call("m", "mess_signals", what=what),
                               _call("h", "hang_then_mark", timeout=2, path=str(mark))])
        assert first.status == "ok" and stuck.status == "timeout"
        end = time.monotonic() + 15  # well inside the 20 s grace: only SIGTERM's raise writes it
        while not mark.exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert mark.read_text() == "finally ran"


@pytest.mark.timeout(120)
def test_sigterm_changes_are_undone_between_the_quick_calls_of_one_chunk(tmp_path):
    """Quick tools are sent in chunks, several calls in one frame: a call that ignores SIGTERM and the
    call after it in the same chunk, which hangs this time: the timeout still raises inside it."""
    mark = tmp_path / "finally"
    with Executor(WARM_TOOLS, mode="fork", workers=1, kill_grace=20.0) as ex:
        for i in range(10):  # both tools are quick now: the pool chunks them
            ex.run([_call(f"w{i}", "mess_signals", what="nothing"),
                    _call(f"q{i}", "hang_then_mark", path=str(tmp_path / "warm"), hang=False)])
        first, stuck = ex.run([_call("m", "mess_signals", what="ignore_term"),
                               _call("h", "hang_then_mark", timeout=2, path=str(mark))])
        assert first.status == "ok" and stuck.status == "timeout"
        assert first.worker_pid == stuck.worker_pid  # one chunk, one worker
        end = time.monotonic() + 15
        while not mark.exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert mark.read_text() == "finally ran"


@pytest.mark.parametrize("what", ["alarm", "bound_alarm", "itimer", "prof_timer"])
@pytest.mark.timeout(120)
def test_a_calls_alarm_or_timer_does_not_go_off_in_the_next_call(what):
    """alarm(), an interval timer (real or profiling) or a pending SIGALRM left by one call: the next
    call (3 s of sleep, or of CPU for the profiling timer) finishes ok on the same worker."""
    with Executor(WARM_TOOLS, mode="fork", workers=1, timeout=90) as ex:
        pid = ex.backend.worker_pids
        first, innocent = ex.run([_call("m", "mess_signals", what=what),
                                  _call("s", "busy", seconds=3 if what != "prof_timer" else 1.0,
                                        cpu=what == "prof_timer")])
        assert first.status == "ok", first.error
        assert innocent.status == "ok", innocent.error
        assert innocent.worker_pid == first.worker_pid and ex.backend.worker_pids == pid


@pytest.mark.timeout(120)
def test_a_signal_left_pending_is_discarded_before_the_next_call():
    """A call blocks SIGALRM and leaves one pending; the next call unblocks SIGALRM (as a library
    managing its own signals would): nothing is delivered, it finishes ok on the same worker."""
    with Executor(WARM_TOOLS, mode="fork", workers=1, timeout=60) as ex:
        first, innocent = ex.run([_call("m", "mess_signals", what="pending_alrm"),
                                  _call("u", "mess_signals", what="unblock_alrm")])
        assert first.status == "ok" and innocent.status == "ok", innocent.error
        assert innocent.worker_pid == first.worker_pid


@pytest.mark.timeout(120)
def test_handlers_installed_by_on_worker_start_are_kept():
    """The baseline is what on_worker_start left: a handler it installs survives every call."""
    with Executor(WARM_TOOLS, mode="fork", workers=1, on_worker_start=_install_usr1) as ex:
        results = ex.run([_call("m", "mess_signals", what="ignore_term"), _call("e", "echo", text="x")])
        assert [r.status for r in results] == ["ok", "ok"]
        worker = results[1].worker_pid
        os.kill(worker, signal.SIGUSR1)  # the baseline handler ignores it; the default would kill
        time.sleep(0.5)
        [again] = ex.run([_call("e2", "echo", text="y")])
        assert again.status == "ok" and again.worker_pid == worker


def _install_usr1() -> None:
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


# ----------------------------------------------------------------------------- children

@pytest.mark.timeout(120)
def test_children_that_exited_are_reaped_between_calls():
    """50 calls that each fork a child and never wait for it leave no zombie in the warm worker."""
    with Executor(WARM_TOOLS, mode="fork", workers=1) as ex:
        results = ex.run([_call(f"z{i}", "leave_zombie") for i in range(50)])
        assert all(r.status == "ok" for r in results)
        worker = psutil.Process(results[-1].worker_pid)
        end = time.monotonic() + 20
        while time.monotonic() < end:  # a child may exit after the reap that followed its own call:
            [r] = ex.run([_call("e", "echo", text="x")])  # the next call's reap takes it
            assert r.worker_pid == worker.pid
            zombies = [c for c in worker.children() if c.status() == psutil.STATUS_ZOMBIE]
            if not zombies:
                break
            time.sleep(0.2)
        assert zombies == []
        assert results[0].worker_pid == results[-1].worker_pid  # one warm worker ran them all


# ----------------------------------------------------------------------------- an Executor across a fork

@pytest.mark.parametrize("how", ["run", "submit", "stream", "imap", "arun", "acall"])
@pytest.mark.timeout(120)
def test_an_executor_built_before_the_fork_fails_at_once_in_a_tool(how, monkeypatch):
    """A tool calls run/submit on an Executor its program built before the worker was forked: a
    clear error at once naming the cause, never EBADF or a wait until the timeout; both executors
    keep working."""
    with Executor(WARM_TOOLS, mode="fork", workers=1) as outer:
        monkeypatch.setattr(hostile_tools, "OUTER", outer)
        with Executor(WARM_TOOLS, mode="fork", workers=1, timeout=60) as ex:
            start = time.monotonic()
            [r] = ex.run([_call("u", "use_outer", how=how)])
            assert time.monotonic() - start < 50
            assert r.status == "error" and r.error.type == "RuntimeError", r
            assert "does not cross a fork" in r.error.message
            [again] = ex.run([_call("e", "echo", text="x")])
            assert again.status == "ok"
        [mine] = outer.run([_call("o", "echo", text="outer")])
        assert mine.status == "ok" and mine.output.content[0].text == "outer"


def test_an_executor_closed_in_a_forked_child_stays_open_in_its_creator(tmp_path):
    """close() in a forked copy (atexit in a child, a with-block in a tool) lets the creator's workers be."""
    with Executor(WARM_TOOLS, mode="fork", workers=1) as ex:
        pid = os.fork()
        if pid == 0:
            try:
                ex.close()
                Path(tmp_path / "closed").write_text("yes")
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert (tmp_path / "closed").read_text() == "yes"
        [r] = ex.run([_call("e", "echo", text="still")])
        assert r.status == "ok" and r.output.content[0].text == "still"


# ----------------------------------------------------------------------------- the same, on the line lane

@pytest.mark.parametrize("attack", ["scribble", "close_channels"])
@pytest.mark.timeout(120)
def test_a_line_that_damages_its_workers_channels_fails_alone_on_the_line_lane(attack, tmp_path):
    """``toolfork run``'s line lane gets the worker core's rules too: the damaging line fails naming
    what happened, its worker is replaced, the lines around it (a large one included) are written."""
    import io
    import json

    from tests.cli.conftest import read_jsonl
    from toolfork.commands import _input
    from toolfork.commands._idset import IdSet
    from toolfork.commands._lane_job import LaneJob
    from toolfork.commands._output import OutFile
    from toolfork.commands._progress import Progress

    skip = fd_inodes()  # before the executor: its pipes are the worker's too
    hostile = {"where": "all", "skip": skip, **({"kinds": "pipes and sockets"} if attack == "close_channels" else {})}
    lines = [{"id": "a", "name": "echo", "arguments": {"text": "x"}},
             {"id": "s", "name": attack, "arguments": hostile},
             {"id": "b", "name": "big_text", "arguments": {"n": BIG}},
             {"id": "c", "name": "echo", "arguments": {"text": "y"}}]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    out_path = tmp_path / "out.jsonl"
    with Executor(WARM_TOOLS, mode="fork", workers=1, timeout=60) as ex:
        before = ex.backend.worker_pids
        start = time.monotonic()
        out = OutFile.open(str(out_path), append=False)
        try:
            LaneJob(ex, _input.LineSource(io.BytesIO(data)), out, Progress(None, None, 1.0), IdSet(), 64).run()
        finally:
            out.close()
        assert time.monotonic() - start < 50  # long before the 60 s timeout: nothing waited for it
        assert ex.backend.worker_pids != before
        _healthy(ex, "after")
    records = read_jsonl(out_path)
    assert [r["id"] for r in records] == ["a", "s", "b", "c"]
    bad = records[1]
    assert bad["status"] in ("error", "crashed"), bad
    assert ("not a toolfork frame" if attack == "scribble" else "closed or replaced") in bad["error"]["message"]
    assert [r["status"] for r in records[::2]] == ["ok", "ok"] and records[3]["status"] == "ok"
    assert len(records[2]["output"]["content"][0]["text"]) == BIG
