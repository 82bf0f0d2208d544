"""No process survives the host: close, Ctrl-C, SIGKILL; fork safety; the sequential fallback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.procs import all_gone as _all_gone
from toolfork.executor import Executor, ToolCall
from toolfork.executor.modes import ENV_VAR

ROOT = Path(__file__).resolve().parents[2]

HOST_SCRIPT = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {root!r})
    from tests.executor import tools_for_tests as T
    from toolfork.executor import Executor, ToolCall
    ex = Executor(T.ALL, mode="fork", workers=3)
    pids = ex.backend.worker_pids + [ex.backend.template_pid]
    print(json.dumps(pids), flush=True)
    {body}
""")


def _start_host(body: str) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST_SCRIPT.format(root=str(ROOT), body=body)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return proc, json.loads(line)




def test_sigkill_of_the_host_takes_every_worker_with_it():
    proc, pids = _start_host(
        "print('busy', flush=True); ex.run([ToolCall(str(i), 'sleep_for', {'seconds': 60}) for i in range(3)])")
    assert proc.stdout.readline().strip() == "busy"
    time.sleep(0.3)  # the calls are running in the workers now
    proc.kill()
    proc.wait(5)
    assert _all_gone(pids, 2.0) == []


def test_ctrl_c_in_the_host_leaves_nothing_behind():
    proc, pids = _start_host(
        "print('busy', flush=True)\n"
        "with ex:\n"
        "    ex.run([ToolCall(str(i), 'sleep_for', {'seconds': 60}) for i in range(3)])")
    assert proc.stdout.readline().strip() == "busy"
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the whole foreground group
    proc.wait(10)
    assert "KeyboardInterrupt" in proc.stderr.read()
    assert _all_gone(pids, 2.0) == []


def test_exit_without_close_leaves_nothing_behind():
    proc, pids = _start_host("ex.run([ToolCall('a', 'add', {'a': 1, 'b': 2})])")
    proc.wait(10)
    assert proc.returncode == 0
    assert _all_gone(pids, 2.0) == []


def test_fork_safety_replacement_worker_with_a_host_thread_holding_the_logging_lock():
    """A replacement worker is forked from the single-threaded template, never from the host, so a
    host thread holding the logging module's lock (or any lock) cannot deadlock it."""
    script = textwrap.dedent(f"""
        import logging, sys, threading, time
        sys.path.insert(0, {str(ROOT)!r})
        from tests.executor import tools_for_tests as T
        from toolfork.executor import Executor, ToolCall
        logging.basicConfig()
        ex = Executor(T.ALL, mode="fork", workers=2)
        # The host logs the crash below (logger toolfork.executor). A logger's first level check takes
        # the module lock this test holds forever, which no real program does: check it once first.
        logging.getLogger("toolfork.executor").isEnabledFor(logging.WARNING)
        held = threading.Event()
        def hog():
            logging._lock.acquire()         # the module lock (every Python we declare), held forever
            held.set()
            time.sleep(60)
        threading.Thread(target=hog, daemon=True).start()
        held.wait()
        r = ex.run([ToolCall("crash", "exit_now", {{"code": 1}})])   # forces a replacement worker
        assert r[0].status == "crashed"
        r = ex.run([ToolCall(str(i), "log_something", {{"message": "hello"}}) for i in range(6)])
        print(sorted({{x.status for x in r}}), len(set(x.worker_pid for x in r)) >= 1, flush=True)
        ex.close()
        import os
        os._exit(0)  # logging.shutdown at exit would wait for the lock our hog thread holds forever
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['ok'] True"


def test_auto_falls_back_to_sequential_when_fork_is_unavailable(monkeypatch):
    import multiprocess

    monkeypatch.setattr(multiprocess, "get_all_start_methods", lambda: ["spawn"])
    with Executor([], mode="auto") as ex:
        assert ex.mode == "sequential" and "no fork start method" in ex.fallback_reason
    with pytest.raises(RuntimeError, match="not possible here"):
        Executor([], mode="fork")


def test_env_var_overrides_auto(monkeypatch):
    from tests.executor import tools_for_tests as T

    monkeypatch.setenv(ENV_VAR, "sequential")
    with Executor(T.ALL) as ex:
        assert ex.mode == "sequential" and ENV_VAR in ex.fallback_reason
        [r] = ex.run([ToolCall("w", "whoami", {})])
        assert r.output.data == os.getpid()
    with Executor(T.ALL, mode="fork", workers=1) as ex:  # an explicit mode is not overridden
        assert ex.mode == "fork" and ex.fallback_reason is None
    monkeypatch.setenv(ENV_VAR, "threads")
    with pytest.raises(ValueError, match=ENV_VAR):
        Executor([])


def _inside_daemon(queue):  # runs in a daemonic multiprocess child
    from tests.executor import tools_for_tests as T

    with Executor(T.ALL) as ex:
        r = ex.run([ToolCall("a", "add", {"a": 2, "b": 2})])
        queue.put((ex.mode, ex.fallback_reason, r[0].output.data))


def test_auto_inside_a_daemonic_process_runs_sequentially():
    import multiprocess

    ctx = multiprocess.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_inside_daemon, args=(q,), daemon=True)
    p.start()
    mode, reason, value = q.get(timeout=20)
    p.join(10)
    assert mode == "sequential" and "daemonic" in reason and value == 4


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        Executor([], mode="threads")
    with pytest.raises(ValueError, match="timeout"):
        Executor([], timeout=0)
    with pytest.raises(ValueError, match="workers"):
        Executor([], mode="fork", workers=0)


def test_a_sequential_timeout_off_the_main_thread_keeps_the_real_output(tmp_path):
    """Nothing can stop a host call off the main thread: the result must not pretend it did not run."""
    import threading

    from tests.executor import tools_for_tests as T

    results = []
    with Executor([T.sleep_for], mode="sequential") as ex:
        t = threading.Thread(target=lambda: results.extend(
            ex.run([ToolCall("s", "sleep_for", {"seconds": 0.4, "value": "done"}, timeout=0.1)])))
        t.start()
        t.join(10)
    (r,) = results
    assert r.status == "timeout"
    assert r.output is not None and r.output.as_text() == "done"  # it ran, and its real output is kept
    assert r.error is not None and "ran to its end" in r.error.message
