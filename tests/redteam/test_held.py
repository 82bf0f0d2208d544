"""Red team, the attacks that held: every way a hostile tool or a hostile input was tried against the
executor, ``toolfork run`` and ``toolfork worker``, each kept by one test so that none comes back.

This module is the index. Attacks already tested elsewhere are listed here with the test that keeps
them; the others are tested below (real forked executors, and the real command in a subprocess).

Kept elsewhere (attack -> the test that keeps it):

tool calls os._exit(7) mid-call
    -> tests/executor/test_fork_pool.py::test_a_crash_fails_only_its_call[exit_now]
tool segfaults (NULL dereference)
    -> tests/executor/test_fork_pool.py::test_a_crash_fails_only_its_call[segfault]
tool SIGKILLs itself (what the OOM killer does)
    -> tests/executor/test_fork_pool.py::test_a_crash_fails_only_its_call[kill_self]
crash of a call inside a chunk of quick calls
    -> tests/executor/test_fork_pool.py::test_calls_queued_behind_a_crash_in_a_chunk_still_run_once
tool hangs; its child shares its process group
    -> tests/executor/test_fork_pool.py::test_timeout_kills_the_worker_its_children_and_runs_finally
tool ignores SIGTERM and hangs
    -> tests/executor/test_fork_pool.py::test_sigkill_after_grace_when_the_tool_ignores_sigterm
100 MB result (library); an 8 MB output line through ``toolfork run``
    -> tests/executor/test_fork_pool.py::test_hundred_megabyte_result_comes_back_whole
    -> tests/cli/test_run.py::test_a_huge_output_is_one_complete_line
result that cannot be pickled (a lock)
    -> tests/executor/test_contract.py::test_unserializable_result_is_an_error_not_a_hang
exception whose __str__ raises
    -> tests/executor/test_fork_pool.py::test_an_exception_that_cannot_be_printed_still_gives_a_result
close() twice; no zombie after close()
    -> tests/executor/test_fork_pool.py::test_close_leaves_no_process_and_no_zombie
host SIGKILLed mid-batch
    -> tests/executor/test_lifecycle.py::test_sigkill_of_the_host_takes_every_worker_with_it
Ctrl-C in the host mid-batch
    -> tests/executor/test_lifecycle.py::test_ctrl_c_in_the_host_leaves_nothing_behind
host exits without close()
    -> tests/executor/test_lifecycle.py::test_exit_without_close_leaves_nothing_behind
fork while a host thread holds the logging lock
    -> tests/executor/test_lifecycle.py::test_fork_safety_replacement_worker_with_a_host_thread_holding_the_logging_lock
cancel / close() while batches run
    -> tests/executor/test_contract.py::test_close_while_batches_run_cancels_them
a timeout or crash in one batch vs. another batch
    -> tests/executor/test_contract.py::test_failures_in_one_batch_never_touch_another
#1 value the host cannot unpickle (data/context/prog.)
    -> tests/redteam/test_unpicklable_frames.py::test_values_the_host_cannot_rebuild_fail_their_call_only
#1 a bad frame between good ones / split across reads
    -> tests/redteam/test_unpicklable_frames.py::test_bad_frames_become_markers_between_good_ones
    -> tests/redteam/test_unpicklable_frames.py::test_a_bad_frame_split_across_reads_is_a_marker_too
#2 setsid double-fork daemon, tool hangs (timeout)
    -> tests/redteam/test_containment.py::test_a_setsid_daemon_dies_at_its_calls_timeout
#2 setsid daemon of a finished call, at close()
    -> tests/redteam/test_containment.py::test_a_setsid_daemon_of_a_finished_call_dies_at_close
#2 helper keeps the result pipe, tool os._exit(3)s
    -> tests/redteam/test_containment.py::test_a_worker_death_is_reported_although_its_helper_holds_the_pipe
#2 daemon ignoring SIGTERM in its own session
    -> tests/redteam/test_containment.py::test_a_helper_ignoring_sigterm_dies_at_the_timeout
#3 quick tool that starts hanging (timeouts != deaths)
    -> tests/redteam/test_containment.py::test_a_timeout_is_not_counted_as_a_worker_death
#8 tool SIGSTOPs the template
    -> tests/redteam/test_containment.py::test_a_stopped_template_is_replaced_and_the_next_batch_returns
#4 sys.exit() in a tool / in before_child / in the CLI
    -> tests/redteam/test_exit_and_fallback.py::test_sys_exit_in_a_tool_is_an_error_naming_systemexit_and_its_code
    -> tests/redteam/test_exit_and_fallback.py::test_sys_exit_in_before_child_is_an_error_naming_the_hook
    -> tests/redteam/test_exit_and_fallback.py::test_sys_exit_does_not_end_toolfork_run
    -> tests/redteam/test_exit_and_fallback.py::test_sys_exit_does_not_end_toolfork_worker
#9 auto inside a (stdlib / multiprocess) daemon
    -> tests/redteam/test_exit_and_fallback.py::
       test_auto_inside_a_stdlib_multiprocessing_daemon_runs_sequentially_and_says_so
    -> tests/redteam/test_exit_and_fallback.py::test_auto_inside_a_multiprocess_daemon_names_the_multiprocess_package
#10 calculator round(7, -10**8); zep POST retried
    -> tests/redteam/test_builtin_tools.py::test_calculator_bounds_every_argument_that_scales_work
    -> tests/redteam/test_builtin_tools.py::test_zep_add_memory_is_not_sent_twice_after_a_5xx
    -> tests/redteam/test_builtin_tools.py::test_forked_workers_do_not_back_off_in_lockstep
#7 ex.run() while iterating ex.stream()
    -> tests/executor/test_contract.py::test_a_batch_started_while_another_is_iterated_runs
#5 JSON nested 1000 deep, NUL, bad UTF-8, 5000-digit int
    -> tests/redteam/test_cli_input_output.py::test_run_answers_every_pathological_line_and_goes_on
    -> tests/redteam/test_cli_input_output.py::test_run_from_a_pipe_and_worker_answer_every_pathological_line
50 MB input line; 50 MB of garbage on one line
    -> tests/redteam/test_cli_input_output.py::
       test_a_50_mb_line_is_a_call_like_any_other_and_garbage_of_that_size_an_error
#6 lone surrogates, NaN, bigint, 5000-deep, unprintable
    -> tests/redteam/test_cli_input_output.py::test_output_is_valid_utf8_json_whatever_the_ids_and_outputs_hold
not JSON, unknown tool, invalid/array arguments, dup id
    -> tests/cli/test_run.py::test_failures_become_records_and_the_run_goes_on
tool printing to stdout (print and fd 1) in run/worker
    -> tests/cli/test_process.py::test_a_tool_printing_to_stdout_cannot_break_the_jsonl_stream
SIGKILL of ``toolfork run`` mid-job, then --resume
    -> tests/cli/test_process.py::test_resume_after_sigkill_finishes_every_call_exactly_once
Ctrl-C of ``toolfork run``, then --resume
    -> tests/cli/test_process.py::test_ctrl_c_stops_cleanly_with_130_and_resume_finishes
Ctrl-C of a co-process (run - -o -, worker)
    -> tests/cli/test_process.py::test_ctrl_c_ends_a_co_process_with_130_and_leaves_no_worker
reader of stdout goes away (| head -1)
    -> tests/cli/test_process.py::test_a_reader_that_goes_away_ends_the_job_quietly
client stops reading but keeps stdin open
    -> tests/cli/test_process.py::test_a_client_that_stops_reading_but_keeps_stdin_open_ends_the_co_process_cleanly
a million-line job (bounded memory)
    -> tests/cli/test_process.py::test_memory_stays_bounded_for_a_long_input
unwritable -o directory
    -> tests/cli/test_run.py::test_usage_errors_exit_2_with_a_message

Kept here (attack -> test in this module; HELD, or FAILS: a bug found by this module):

RLIMIT_AS set by the tool, 64 MB headroom, asks 2 GB (HELD)
    -> test_a_hostile_call_fails_alone_and_the_pool_recovers[oom_headroom]
RLIMIT_AS set to exactly what it uses, allocates until it bites (HELD)
    -> test_a_hostile_call_fails_alone_and_the_pool_recovers[oom_no_headroom]
RLIMIT_CPU one second away, spins: killed by SIGXCPU (HELD)
    -> test_a_hostile_call_fails_alone_and_the_pool_recovers[cpu_rlimit]
raises KeyboardInterrupt / sends SIGTERM to itself, no timeout (HELD: "crashed", its call only)
    -> test_a_hostile_call_fails_alone_and_the_pool_recovers[interrupt_self], [sigterm_self]
closes its stdout and stderr / closes every fd >= 3 (HELD)
    -> test_a_hostile_call_fails_alone_and_the_pool_recovers[close_stdio], [close_all_fds]
SIGSTOPs its own worker (SIGTERM stays pending) (HELD)
    -> test_a_worker_that_stops_itself_is_killed_at_its_timeout
child leaves the worker's group (setpgid) / session (setsid), ignores SIGTERM (HELD)
    -> test_a_child_that_leaves_the_workers_group_dies_at_the_timeout[setpgid], [setsid]
writes to /dev/full (ENOSPC) (HELD)
    -> test_a_full_disk_is_an_error_naming_the_errno
result nested 10,000 deep / exception holding a lock (HELD)
    -> test_a_result_ten_thousand_levels_deep_is_an_error_not_a_hang
    -> test_an_exception_that_cannot_be_pickled_is_an_error_naming_it
200 threads / 50 SIGTERM-ignoring children left running (HELD)
    -> test_threads_left_running_neither_block_the_pool_nor_outlive_close
    -> test_fifty_children_left_running_die_at_close
worker ended by a thread the call left, between calls (HELD)
    -> test_a_worker_that_dies_between_calls_is_replaced
careless fork: the child unwinds into the worker loop (FAILS: wrong result, later calls lost)
    -> test_a_forked_copy_of_the_worker_never_answers_a_call
tool SIGKILLs the template (FAILS: BrokenPipeError out of run)
    -> test_a_tool_that_kills_the_template_loses_no_batch
timeout=float("inf") on a call or the executor (FAILS: OverflowError out of run)
    -> test_an_infinite_timeout_is_no_timeout[call], [executor]
CLI: 50 MB on stdout and stderr, -o FILE and -o - (HELD)
    -> test_fifty_megabytes_of_chatter_leave_the_records_valid[file], [stdout]
CLI: -o /dev/full, and -o - with stdout on /dev/full (HELD: exit 2, one line, no traceback)
    -> test_output_to_a_full_disk_is_a_clear_error_not_a_traceback
CLI: random bytes (fixed seed), JSON array/number/string/null/bool lines, ill-typed arguments, ids,
names and timeouts, a 10,000-character tool name, run and worker (HELD)
    -> test_garbage_lines_each_get_one_error_record_and_the_job_goes_on[run], [worker]
CLI: "function" that is a string or a list (FAILS: id line-N and an AttributeError message)
    -> test_a_function_field_that_is_not_an_object_is_a_record_with_the_lines_id
CLI: "timeout": NaN / Infinity (FAILS: Infinity is an OverflowError traceback, the job ends; NaN runs
the call with a timeout of "nan")
    -> test_timeouts_that_are_not_finite_numbers_do_not_end_the_job
CLI: SIGKILL of run, then SIGKILL of its --resume, then --resume (HELD: each line once, no worker left)
    -> test_sigkill_of_run_and_of_its_resume_then_resume_answers_every_line_once

Sessions and telemetry (kept elsewhere):
session lines with a key that is not a string, session_args that change, no --session-factory
    -> tests/cli/test_run_sessions.py::test_bad_session_lines_get_their_own_records,
       ::test_session_lines_without_a_factory_are_refused_line_by_line
a factory that cannot be loaded -> ::test_a_factory_that_cannot_be_loaded_is_exit_2_before_any_call
a session tool that crashes; --resume after a kill mid-session (no reset state, no silent replay)
    -> ::test_a_crash_loses_its_session_only_unless_checkpointed,
       ::test_resume_does_not_run_a_half_done_session_on_a_fresh_state,
       ::test_a_session_call_that_may_have_run_stops_its_session_on_resume
input from a pipe, a co-process that waits for each record before it writes the next line
    -> ::test_the_same_from_a_pipe_and_in_sequential_mode,
       ::test_a_co_process_gets_each_session_record_before_it_sends_the_next_line
a tool that kills the sessions' supervisor; 260 sessions at once (past select()'s 1024 descriptors);
sessions dying while checkpoints are named
    -> tests/executor/test_session_supervisor.py (every test)
an OTEL_* exporter that is not installed; SIGTERM mid-job; a worker inheriting the host's metric reader
    -> tests/observability/test_commands_otel.py::test_an_exporter_that_is_not_installed_is_a_warning_and_the_job_runs,
       ::test_toolfork_run_stopped_by_sigterm_still_exports_what_it_did,
       ::test_workers_run_no_metric_reader_thread_of_the_hosts
"""

from __future__ import annotations

import errno
import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.redteam.conftest import REPO, child_env, line, records, toolfork
from toolfork import ToolOutput, tool
from toolfork.executor import Executor, ToolCall

HELD = "tests/redteam/test_held.py:CLI_TOOLS"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _gone(pids: list[int], limit: float = 10.0) -> list[int]:
    """The pids still alive after waiting up to ``limit`` seconds for all of them to go."""
    end = time.monotonic() + limit
    alive = list(pids)
    while alive and time.monotonic() < end:
        time.sleep(0.02)
        alive = [p for p in alive if _alive(p)]
    return alive


def _wait_pid_file(path: Path, limit: float = 20.0) -> int:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            return int(path.read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.01)
    raise AssertionError(f"{path} was never written")


def _pool_pids(ex: Executor) -> list[int]:
    return [*ex.backend.worker_pids, ex.backend.template_pid]


def _next_batch_is_whole(ex: Executor, workers: int = 2) -> None:
    """After the attack: a batch with no timeout anywhere returns every call, and the pool is full."""
    results = ex.run([ToolCall(f"after{i}", "echo", {"x": i}) for i in range(12)])
    assert [r.output.data if r.status == "ok" else r.status for r in results] == list(range(12))
    assert len(ex.backend.worker_pids) == workers


# ------------------------------------------------------------------------------------------ hostile tools


@tool
def echo(x: int) -> int:
    """Return x."""
    return x


def _headroom_limit(extra: int) -> None:
    vms = psutil.Process().memory_info().vms
    resource.setrlimit(resource.RLIMIT_AS, (vms + extra, resource.getrlimit(resource.RLIMIT_AS)[1]))


@tool
def oom_headroom() -> str:
    """Lower our own address-space limit to 64 MB above what we use, then ask for 2 GB."""
    _headroom_limit(64 << 20)
    blob = bytearray(2 << 30)
    return str(len(blob))


@tool
def oom_no_headroom() -> str:
    """Lower our own address-space limit to exactly what we use, then allocate until it bites."""
    _headroom_limit(0)
    hoard = []
    while True:
        hoard.append(bytearray(1 << 16))


@tool
def cpu_rlimit() -> str:
    """Set a CPU-time limit one second away, then spin: the kernel kills us with SIGXCPU."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.getrlimit(resource.RLIMIT_CPU)[1]))
    while True:
        pass


@tool
def interrupt_self() -> str:
    """Raise KeyboardInterrupt, as a tool that catches nothing would when a signal handler raises."""
    raise KeyboardInterrupt


@tool
def sigterm_self() -> str:
    """Send SIGTERM to our own process, no timeout anywhere."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    return "unreachable"


@tool
def close_stdio() -> str:
    """Close descriptors 1 and 2, then return normally."""
    os.close(1)
    os.close(2)
    return "closed"


@tool
def close_all_fds() -> str:
    """Close every descriptor from 3 up (the worker's pipes among them), then return."""
    os.closerange(3, 4096)
    return "closed"


@tool
def stop_self() -> str:
    """SIGSTOP our own process: SIGTERM then stays pending, only SIGKILL ends us."""
    os.kill(os.getpid(), signal.SIGSTOP)
    return "continued"


@tool
def escape_group(pid_file: str, how: str) -> str:
    """Start a child that leaves our process group (``setpgid``) or session (``setsid``), ignores
    SIGTERM and sleeps 600 s; then hang."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0) if how == "setpgid" else os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            Path(pid_file + ".tmp").write_text(str(os.getpid()))
            os.rename(pid_file + ".tmp", pid_file)
            time.sleep(600)
        finally:
            os._exit(0)
    while True:
        time.sleep(0.05)


@tool
def write_dev_full() -> str:
    """Write to /dev/full: every write fails with ENOSPC."""
    with open("/dev/full", "wb", buffering=0) as f:
        f.write(b"x" * 4096)
    return "written"


@tool
def deep_result(depth: int) -> ToolOutput:
    """A result nested ``depth`` lists deep (neither pickle nor JSON can take 10,000)."""
    data: Any = []
    for _ in range(depth):
        data = [data]
    return ToolOutput(content=ToolOutput.text("deep").content, data=data)


class LockedError(Exception):
    """An exception that carries a lock: it cannot be pickled to reach the host."""

    def __init__(self) -> None:
        super().__init__("holding a lock")
        self.lock = threading.Lock()


@tool
def raise_unpicklable() -> str:
    """Raise an exception that cannot be pickled."""
    raise LockedError()


@tool
def leave_threads(n: int) -> int:
    """Start ``n`` non-daemon threads that sleep 600 s, and return while they run."""
    for _ in range(n):
        threading.Thread(target=time.sleep, args=(600,)).start()
    return threading.active_count()


@tool
def leave_children(n: int, pid_file: str) -> int:
    """Fork ``n`` children that ignore SIGTERM and sleep 600 s; record their pids; return."""
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(600)
            os._exit(0)
        pids.append(pid)
    Path(pid_file).write_text(json.dumps(pids))
    return os.getpid()


@tool
def die_later(delay: float) -> int:
    """Return at once, but leave a thread that ends the worker ``delay`` seconds later (between calls)."""
    def end() -> None:
        time.sleep(delay)
        os._exit(1)

    threading.Thread(target=end, daemon=True).start()
    return os.getpid()


@tool
def fork_work(pid_file: str) -> str:
    """Fork a child to do the work, as careless code does: the child's work raises before its
    ``os._exit(0)``, so the child unwinds out of the tool into the worker's loop."""
    pid = os.fork()
    if pid == 0:
        raise ValueError("the child's work failed")
    Path(pid_file).write_text(str(pid))
    return "parent done"


@tool
def kill_parent() -> str:
    """SIGKILL the process that forked this worker (the template)."""
    os.kill(os.getppid(), signal.SIGKILL)
    return "killed it"


LIB_TOOLS = [echo, oom_headroom, oom_no_headroom, cpu_rlimit, interrupt_self, sigterm_self, close_stdio,
             close_all_fds, stop_self, escape_group, write_dev_full, deep_result, raise_unpicklable,
             leave_threads, leave_children, die_later, fork_work, kill_parent]


# --------------------------------------------------------------------------------- tools for the CLI


@tool
def say(text: str) -> str:
    """Return the text.

    Args:
        text: what to return
    """
    return text


@tool
def chatter(megabytes: int, text: str) -> str:
    """Write ``megabytes`` MB to descriptor 1 and as much to descriptor 2 (no newline at the end of
    either), then return the text.

    Args:
        megabytes: how much to write on each
        text: what to return
    """
    block = b"{\"id\": \"forged\", " * 65536  # about 1 MB that looks like the start of a record
    for fd in (1, 2):
        for _ in range(megabytes):
            view = memoryview(block)
            while view:
                view = view[os.write(fd, view):]
    return text


@tool
def nap(seconds: float, tag: str) -> str:
    """Sleep, then return the tag.

    Args:
        seconds: how long
        tag: what to return
    """
    time.sleep(seconds)
    return tag


CLI_TOOLS = [say, chatter, nap]


# ---------------------------------------------------------------------------- calls that fail alone


# (tool, the statuses it may get, a piece of its error message)
ALONE = [
    ("oom_headroom", {"error"}, "MemoryError"),
    ("oom_no_headroom", {"error", "crashed"}, ""),
    ("cpu_rlimit", {"crashed"}, "SIGXCPU"),
    ("interrupt_self", {"error", "crashed"}, ""),
    ("sigterm_self", {"error", "crashed"}, ""),
    ("close_all_fds", {"crashed"}, "crashed"),
    ("close_stdio", {"ok"}, ""),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "statuses", "said"), ALONE, ids=[a[0] for a in ALONE])
def test_a_hostile_call_fails_alone_and_the_pool_recovers(name: str, statuses: set[str], said: str) -> None:
    with Executor(LIB_TOOLS, mode="fork", workers=2, kill_grace=0.2) as ex:
        results = ex.run([ToolCall("a", "echo", {"x": 1}), ToolCall("h", name, {}),
                          ToolCall("b", "echo", {"x": 2})])
        hostile = results[1]
        assert hostile.status in statuses, (hostile.status, hostile.error)
        if said:
            assert said in f"{hostile.error.type}: {hostile.error.message}", hostile.error
        assert [r.output.data for r in (results[0], results[2])] == [1, 2]
        _next_batch_is_whole(ex)


@pytest.mark.timeout(60)
def test_a_worker_that_stops_itself_is_killed_at_its_timeout() -> None:
    with Executor(LIB_TOOLS, mode="fork", workers=2, kill_grace=0.2) as ex:
        [stopped, other] = ex.run([ToolCall("s", "stop_self", {}, timeout=0.5), ToolCall("e", "echo", {"x": 3})])
        assert stopped.status == "timeout" and other.output.data == 3
        assert _gone([stopped.worker_pid]) == []  # SIGTERM stays pending on a stopped process: SIGKILL did it
        _next_batch_is_whole(ex)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["setpgid", "setsid"])
def test_a_child_that_leaves_the_workers_group_dies_at_the_timeout(how: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    with Executor(LIB_TOOLS, mode="fork", workers=2, kill_grace=0.2) as ex:
        [r] = ex.run([ToolCall("g", "escape_group", {"pid_file": str(pid_file), "how": how}, timeout=1.0)])
        assert r.status == "timeout"
        child = _wait_pid_file(pid_file)
        assert _gone([child]) == [], f"the child that left by {how} outlived its call's timeout"
        _next_batch_is_whole(ex)


def test_a_full_disk_is_an_error_naming_the_errno() -> None:
    with Executor(LIB_TOOLS, mode="fork", workers=2) as ex:
        [full, other] = ex.run([ToolCall("f", "write_dev_full", {}), ToolCall("e", "echo", {"x": 4})])
        assert full.status == "error" and full.error.type == "OSError"
        assert f"[Errno {errno.ENOSPC}]" in full.error.message and "No space left" in full.error.message
        assert other.output.data == 4


@pytest.mark.timeout(60)
def test_a_result_ten_thousand_levels_deep_is_an_error_not_a_hang() -> None:
    with Executor(LIB_TOOLS, mode="fork", workers=2) as ex:
        results = ex.run([ToolCall("d", "deep_result", {"depth": 10_000}), ToolCall("e", "echo", {"x": 5}),
                          ToolCall("ok", "deep_result", {"depth": 50})])
        assert results[0].status == "error" and "could not be serialized" in results[0].error.message
        assert results[1].output.data == 5 and results[2].status == "ok"
        _next_batch_is_whole(ex)


def test_an_exception_that_cannot_be_pickled_is_an_error_naming_it() -> None:
    with Executor(LIB_TOOLS, mode="fork", workers=2) as ex:
        [r, other] = ex.run([ToolCall("u", "raise_unpicklable", {}), ToolCall("e", "echo", {"x": 6})])
        assert r.status == "error" and r.error.type == "LockedError" and "holding a lock" in r.error.message
        assert other.output.data == 6
        _next_batch_is_whole(ex)


# --------------------------------------------------------------------- what a call leaves running


@pytest.mark.timeout(60)
def test_threads_left_running_neither_block_the_pool_nor_outlive_close() -> None:
    ex = Executor(LIB_TOOLS, mode="fork", workers=2)
    try:
        [r] = ex.run([ToolCall("t", "leave_threads", {"n": 200})])
        assert r.status == "ok" and r.output.data > 200
        assert psutil.Process(r.worker_pid).num_threads() > 200  # they are still running
        _next_batch_is_whole(ex)
        pids = _pool_pids(ex)
    finally:
        ex.close()
    assert _gone(pids, 5.0) == []


@pytest.mark.timeout(60)
def test_fifty_children_left_running_die_at_close(tmp_path: Path) -> None:
    pid_file = tmp_path / "children.json"
    ex = Executor(LIB_TOOLS, mode="fork", workers=2)
    try:
        [r] = ex.run([ToolCall("c", "leave_children", {"n": 50, "pid_file": str(pid_file)})])
        assert r.status == "ok"
        children = json.loads(pid_file.read_text())
        assert len(children) == 50 and all(_alive(p) for p in children)  # a call may leave work running...
        _next_batch_is_whole(ex)
        pids = _pool_pids(ex)
    finally:
        ex.close()
    assert _gone(children + pids) == [], "...but none of it survives close()"


@pytest.mark.timeout(60)
def test_a_worker_that_dies_between_calls_is_replaced() -> None:
    with Executor(LIB_TOOLS, mode="fork", workers=2) as ex:
        [r] = ex.run([ToolCall("d", "die_later", {"delay": 0.2})])
        assert r.status == "ok" and r.output.data == r.worker_pid
        assert _gone([r.worker_pid]) == []
        _next_batch_is_whole(ex)
        assert r.worker_pid not in ex.backend.worker_pids


@pytest.mark.timeout(90)
def test_a_forked_copy_of_the_worker_never_answers_a_call(tmp_path: Path) -> None:
    """The child of a careless fork unwinds out of the tool into the worker's loop: it must not send
    the call's result (the parent's is the one), nor read later calls (a frame split between two
    readers of one pipe is a call lost: without a timeout, a batch that never returns)."""
    pid_file = tmp_path / "child.pid"
    ex = Executor(LIB_TOOLS, mode="fork", workers=1)
    try:
        [r] = ex.run([ToolCall("f", "fork_work", {"pid_file": str(pid_file)})])
        assert r.status == "ok" and r.output.as_text() == "parent done", (r.status, r.error)
        child = _wait_pid_file(pid_file)
        for batch in range(25):  # each call gets a timeout here only so that a lost one fails, not hangs
            results = ex.run([ToolCall(f"c{i}", "echo", {"x": i}, timeout=5) for i in range(40)])
            lost = [(x.call_id, x.status) for x in results if x.status != "ok"]
            assert not lost, f"batch {batch}: {lost}"
            assert [x.output.data for x in results] == list(range(40))
        pids = _pool_pids(ex)
    finally:
        ex.close()
    assert _gone([child, *pids]) == []


@pytest.mark.timeout(60)
def test_a_tool_that_kills_the_template_loses_no_batch() -> None:
    """The template SIGKILLed by a tool (its parent): ``run`` must not raise out of cleanup code (a
    BrokenPipeError); each batch comes back or fails with a clear RuntimeError naming the template, and
    nothing is left after close(). A call comes back with its value, or, if it was running on a worker
    of that template when it died, "crashed" naming the template, as documented: never lost. On a
    loaded machine that can be a batch-mate on the other worker, or a call of the next batch that
    reached a worker before the template's exit; once the death is seen, batches are whole again."""
    ex = Executor(LIB_TOOLS, mode="fork", workers=2)
    pids = _pool_pids(ex)
    try:
        batches = [[ToolCall("a", "echo", {"x": 1}), ToolCall("k", "kill_parent", {}), ToolCall("b", "echo", {"x": 2})],
                   [ToolCall(f"n{i}", "echo", {"x": i}) for i in range(6)]]
        for calls in batches:
            try:
                results = ex.run(calls)
            except RuntimeError as exc:
                assert "template" in str(exc), repr(exc)
                continue
            assert [r.call_id for r in results] == [c.id for c in calls]
            for call, r in zip(calls, results, strict=True):
                if r.status == "ok":
                    if call.name == "echo":
                        assert r.output is not None and r.output.data == call.arguments["x"], r
                else:
                    assert r.status == "crashed" and r.error is not None and "template" in r.error.message, r
        end = time.monotonic() + 10  # seen within a second (the pool's watcher looks), then replaced
        while ex.backend.template_pid in pids and time.monotonic() < end:
            time.sleep(0.05)
        assert ex.backend.template_pid not in pids
        results = ex.run([ToolCall(f"m{i}", "echo", {"x": i}) for i in range(6)])
        assert [r.output.data for r in results] == list(range(6)), results  # type: ignore[union-attr]
    finally:
        ex.close()
    assert _gone(pids) == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("where", ["call", "executor"])
def test_an_infinite_timeout_is_no_timeout(where: str) -> None:
    inf = float("inf")
    with Executor(LIB_TOOLS, mode="fork", workers=2, timeout=inf if where == "executor" else None) as ex:
        results = ex.run([ToolCall("i", "echo", {"x": 1}, timeout=inf if where == "call" else None),
                          ToolCall("e", "echo", {"x": 2})])
        assert [r.output.data for r in results] == [1, 2], [(r.status, r.error) for r in results]


# ----------------------------------------------------------------------------------------- the CLI


@pytest.mark.timeout(90)
@pytest.mark.parametrize("output", ["file", "stdout"])
def test_fifty_megabytes_of_chatter_leave_the_records_valid(output: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(line({"id": "loud", "name": "chatter", "arguments": {"megabytes": 50, "text": "done"}})
                      + line({"id": "quiet", "name": "say", "arguments": {"text": "hi"}}))
    out = tmp_path / "out.jsonl"
    proc = toolfork("run", str(calls), "-o", str(out) if output == "file" else "-", "--tools", HELD,
                    "--workers", "2", "-q")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = records(out.read_bytes() if output == "file" else proc.stdout)  # stdout: records and nothing else
    assert [(r["id"], r["status"], r["output"]["content"][0]["text"]) for r in got] == [
        ("loud", "ok", "done"), ("quiet", "ok", "hi")]
    assert b"forged" not in (out.read_bytes() if output == "file" else proc.stdout)
    # The chatter of both descriptors arrives whole, on stderr (and, with -o FILE, on stdout).
    assert (proc.stdout + proc.stderr).count(b'{"id": "forged", ') == 2 * 50 * 65536


@pytest.mark.timeout(180)  # two CLI runs that each start a pool: slow on a loaded 2-core CI machine
def test_output_to_a_full_disk_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(b"".join(line({"id": f"s{i}", "name": "say", "arguments": {"text": "x" * 1000}})
                               for i in range(50)))
    named = toolfork("run", str(calls), "-o", "/dev/full", "--tools", HELD, "--workers", "2", "-q")
    with open("/dev/full", "wb") as full:
        piped = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", str(calls), "-o", "-", "--tools",
                                HELD, "--workers", "2", "-q"], stdout=full, stderr=subprocess.PIPE, cwd=REPO,
                               env=child_env(), timeout=120)
    for proc in (named, piped):
        assert proc.returncode == 2, proc.stderr
        err = proc.stderr.decode()
        assert "Traceback" not in err
        assert err.startswith("toolfork run: error:") and "No space left on device" in err, err


def _garbage_lines() -> list[tuple[bytes, str, str]]:
    """(line, id of its record, a piece of its error record's "type: message")."""
    rnd = random.Random(20240611)
    cases: list[tuple[bytes, str]] = []  # (raw line, expected error piece); ids are filled in below
    for _ in range(40):
        body = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 300))).replace(b"\n", b"#")
        cases.append((bytes([rnd.randrange(0x21, 0x7f)]) + body, "MalformedCallError"))
    ill_typed: list[tuple[Any, str]] = [
        ([{"id": "arr", "name": "say", "arguments": {"text": "a"}}], "expected a JSON object, got array"),
        (12345, "expected a JSON object, got number"),
        ("a string", "expected a JSON object, got string"),
        (None, "expected a JSON object, got null"),
        (True, "expected a JSON object, got boolean"),
        ({"id": "args-str", "name": "say", "arguments": "not json"}, "not valid JSON"),
        ({"id": "args-json-str", "name": "say", "arguments": "\"a string\""}, "must be a JSON object, got string"),
        ({"id": "args-num", "name": "say", "arguments": 7}, "must be a JSON object, got number"),
        ({"id": "args-bool", "name": "say", "arguments": False}, "must be a JSON object, got boolean"),
        ({"id": {"nested": "id"}, "name": "say", "arguments": {"text": "a"}}, '"id" must be a string or an integer'),
        ({"id": ["x"], "name": "say", "arguments": {"text": "a"}}, '"id" must be a string or an integer'),
        ({"id": 1.5, "name": "say", "arguments": {"text": "a"}}, '"id" must be a string or an integer'),
        ({"id": False, "name": "say", "arguments": {"text": "a"}}, '"id" must be a string or an integer'),
        ({"id": "name-num", "name": 42, "arguments": {}}, '"name" must be a non-empty string'),
        ({"id": "name-empty", "name": "", "arguments": {}}, '"name" must be a non-empty string'),
        ({"id": "name-long", "name": "n" * 10_000, "arguments": {}}, "UnknownToolError"),
        ({"id": "to-str", "name": "say", "arguments": {"text": "a"}, "timeout": "1"}, '"timeout" must be'),
        ({"id": "to-neg", "name": "say", "arguments": {"text": "a"}, "timeout": -1}, '"timeout" must be'),
        ({"id": "to-bool", "name": "say", "arguments": {"text": "a"}, "timeout": True}, '"timeout" must be'),
        ({"id": "wrong-arg", "name": "say", "arguments": {"text": {"deep": [1]}}}, "ToolInputError"),
    ]
    out: list[tuple[bytes, str, str]] = []
    for lineno, (raw, said) in enumerate(cases + [(json.dumps(v).encode(), s) for v, s in ill_typed], start=2):
        obj = None
        try:
            obj = json.loads(raw)
        except ValueError:
            pass
        call_id = obj.get("id") if isinstance(obj, dict) else None
        ok_id = isinstance(call_id, (str, int)) and not isinstance(call_id, bool)
        out.append((raw + b"\n", str(call_id) if ok_id else f"line-{lineno}", said))
    first = (line({"id": "first", "name": "say", "arguments": {"text": "a"}}), "first", "")
    last = (line({"id": "last", "name": "say", "arguments": {"text": "z"}}), "last", "")
    return [first, *out, last]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("command", ["run", "worker"])
def test_garbage_lines_each_get_one_error_record_and_the_job_goes_on(command: str, tmp_path: Path) -> None:
    cases = _garbage_lines()
    data = b"".join(raw for raw, _, _ in cases)
    if command == "run":
        calls = tmp_path / "calls.jsonl"
        calls.write_bytes(data)
        proc = toolfork("run", str(calls), "--tools", HELD, "--workers", "2", "-q")
        assert proc.returncode == 1, proc.stderr[-2000:]
    else:
        proc = toolfork("worker", "--tools", HELD, "--workers", "2", stdin=data)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert b"Traceback" not in proc.stderr
    got = records(proc.stdout)
    if command == "worker":
        order = [i for _, i, _ in cases]
        got.sort(key=lambda r: order.index(r["id"]))
    assert [r["id"] for r in got] == [i for _, i, _ in cases]
    assert got[0]["status"] == got[-1]["status"] == "ok"
    for record, (_, _, said) in zip(got[1:-1], cases[1:-1], strict=True):
        assert record["status"] == "error", record
        text = f'{record["error"]["type"]}: {record["error"]["message"]}'
        assert said in text, record


def test_a_function_field_that_is_not_an_object_is_a_record_with_the_lines_id() -> None:
    """An OpenAI-shaped line whose ``function`` is a string: a MalformedCallError under the line's own
    id naming the field (docs/cli-run.md), like every other ill-typed field, not a caught
    AttributeError under ``line-N``."""
    bad = [line({"id": "fn-str", "type": "function", "function": "say"}),
           line({"id": "fn-list", "type": "function", "function": ["say"]})]
    proc = toolfork("run", "-", "-o", "-", "--tools", HELD, "-q", stdin=b"".join(bad))
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr, proc.stderr
    got = records(proc.stdout)
    assert [r["id"] for r in got] == ["fn-str", "fn-list"], got
    for record in got:
        assert record["error"]["type"] == "MalformedCallError" and '"function' in record["error"]["message"]
        assert "AttributeError" not in record["error"]["message"], record


@pytest.mark.timeout(60)
def test_timeouts_that_are_not_finite_numbers_do_not_end_the_job(tmp_path: Path) -> None:
    """JSON parsers in Python accept NaN and Infinity: NaN is no number of seconds (a
    MalformedCallError, as for any bad timeout); Infinity is no limit at all (or refused likewise).
    Neither may end the job or run the call with a timeout of "nan"."""
    rows = [b'{"id": "nan", "name": "say", "arguments": {"text": "a"}, "timeout": NaN}\n',
            b'{"id": "inf", "name": "say", "arguments": {"text": "b"}, "timeout": Infinity}\n',
            line({"id": "after", "name": "say", "arguments": {"text": "c"}})]
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(b"".join(rows))
    proc = toolfork("run", str(calls), "--tools", HELD, "--workers", "2", "-q")
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()[-3000:]
    nan, inf, after = records(proc.stdout)
    assert nan["id"] == "nan" and nan["error"]["type"] == "MalformedCallError", nan
    assert inf["status"] == "ok" or inf["error"]["type"] == "MalformedCallError", inf
    assert after["status"] == "ok"


@pytest.mark.timeout(120)
def test_sigkill_of_run_and_of_its_resume_then_resume_answers_every_line_once(tmp_path: Path) -> None:
    ids = [f"k{i:03d}" for i in range(60)]
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(b"".join(line({"id": i, "name": "nap", "arguments": {"seconds": 0.04, "tag": i}})
                               for i in ids))
    out = tmp_path / "out.jsonl"
    args = [sys.executable, "-m", "toolfork.cli", "run", str(calls), "-o", str(out), "--tools", HELD,
            "--workers", "2", "-q"]
    seen = 0
    # --rerun-unknown: the naps a SIGKILL cut short have an unknown outcome; napping again is harmless
    for extra in ([], ["--resume", "--rerun-unknown"]):
        proc = subprocess.Popen([*args, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
                                env=child_env())
        end = time.monotonic() + 40
        while (not out.exists() or out.read_bytes().count(b"\n") < seen + 10) and time.monotonic() < end:
            time.sleep(0.01)
        below = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert below and _gone(below) == [], "the killed job's workers outlived it"
        done = out.read_bytes().count(b"\n")
        assert seen + 10 <= done < len(ids), "the job was not killed midway"
        seen = done
    final = subprocess.run([*args, "--resume", "--rerun-unknown"], capture_output=True, cwd=REPO, env=child_env(),
                           timeout=60)
    assert final.returncode == 0, final.stderr
    got = records(out.read_bytes())
    assert sorted(r["id"] for r in got) == ids  # every line answered, exactly once
    assert all(r["status"] == "ok" and r["output"]["content"][0]["text"] == r["id"] for r in got)
