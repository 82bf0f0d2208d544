"""A sandboxed call keeps the executor's promises: it is stopped at its timeout even after leaving its
process group, a crash in it is named, a call that goes on fine returns, and nothing is left behind
(the suite-wide fixture of tests/conftest.py fails a test that leaves a process)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from toolfork import Limits
from toolfork.executor import Executor
from toolfork.tools.tool import Tool

from .conftest import USERS


def hang(leave_group: bool) -> str:
    """Sleep far past the timeout, outside the worker's process group if asked and if it can: by setsid,
    or, where the call's process leads its group (then setsid is refused), by moving into a child's
    group (the sandbox refuses that too) while another child stays in the old one."""
    import time

    if leave_group:
        try:
            os.setsid()
        except PermissionError:
            if os.fork() == 0:  # stays in the call's group
                time.sleep(60)
                os._exit(0)
            child = os.fork()
            if child == 0:
                os.setpgid(0, 0)
                time.sleep(60)
                os._exit(0)
            os.setpgid(child, child)
            try:
                os.setpgid(0, child)
            except PermissionError:
                pass
    time.sleep(60)
    return "woke"


def segfault() -> str:
    """Die of SIGSEGV (a real fault: the call is PID 1 of its namespace, which the kernel shields from
    signals it sends itself without a handler)."""
    import ctypes

    ctypes.string_at(0)
    return "survived"


def test_a_sandboxed_call_is_stopped_at_its_timeout_even_out_of_its_process_group() -> None:
    tool = Tool("hang", fn=hang, limits=Limits(network=False))
    with Executor([tool], workers=1, timeout=1.0, kill_grace=1.0) as ex:
        results = ex.run([{"id": "stay", "name": "hang", "arguments": {"leave_group": False}},
                          {"id": "leave", "name": "hang", "arguments": {"leave_group": True}}])
    assert [r.status for r in results] == ["timeout", "timeout"], [r.error for r in results]


def test_a_crash_in_the_sandbox_is_named() -> None:
    with Executor([Tool("segfault", fn=segfault, limits=Limits(sandbox=True))], workers=1, timeout=30) as ex:
        (r,) = ex.run([{"id": "1", "name": "segfault", "arguments": {}}])
    assert r.status == "crashed" and r.error is not None and "SIGSEGV" in r.error.message, r.error


CALLS_SEEN = 0


def identity() -> dict[str, object]:
    """How many calls this process ran, and its PID (1: its own PID namespace's first process)."""
    global CALLS_SEEN
    CALLS_SEEN += 1
    return {"pid": os.getpid(), "calls": CALLS_SEEN}


def test_each_sandboxed_call_gets_a_sandbox_of_its_own_even_when_entered_ahead() -> None:
    tool = Tool("identity", fn=identity, limits=Limits(sandbox=True))
    with Executor([tool], workers=2, timeout=30) as ex:
        results = []
        for batch in range(3):  # later calls take sandboxes the template entered ahead of them
            results += ex.run([{"id": f"{batch}-{i}", "name": "identity", "arguments": {}} for i in range(3)])
    outs = [r.output.data if r.output is not None else r.error for r in results]
    assert all(r.status == "ok" for r in results), outs
    assert [(o["pid"], o["calls"]) for o in outs] == [(1, 1)] * 9, outs  # type: ignore[index]
    assert len({r.worker_pid for r in results}) == 9, [r.worker_pid for r in results]  # one process per call


def later() -> str:
    """A tool added after sandboxes were entered ahead."""
    return "added later"


def test_a_tool_added_later_reaches_its_sandboxed_call() -> None:
    limits = Limits(network=False)
    with Executor([Tool("identity", fn=identity, limits=limits)], workers=1, timeout=30) as ex:
        (first,) = ex.run([{"id": "1", "name": "identity", "arguments": {}}])
        ex.add_tools(Tool("later", fn=later, limits=limits))
        (second,) = ex.run([{"id": "2", "name": "later", "arguments": {}}])
    assert first.status == "ok", first.error
    assert second.status == "ok" and second.output is not None, second.error
    assert second.output.content[0].text == "added later", second.output


def own_thread_id() -> int:
    """Ask the C library to act on this thread through the thread id it keeps for it
    (``pthread_setschedprio`` passes it to the kernel): 0, or the error number it got."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_ulong
    return int(libc.pthread_setschedprio(ctypes.c_ulong(libc.pthread_self()), 0))


def test_the_c_library_of_a_sandboxed_call_knows_its_own_thread_id() -> None:
    """The sandbox's first process is made by one clone(2) in the template: the C library's record of
    its thread id must be its own (1, PID 1 of its namespace), not the template's (no such process
    there: ESRCH), or every call that passes it to the kernel misses."""
    with Executor([Tool("own_thread_id", fn=own_thread_id, limits=Limits(sandbox=True))], workers=1,
                  timeout=30) as ex:
        (r,) = ex.run([{"id": "1", "name": "own_thread_id", "arguments": {}}])
    assert r.status == "ok" and r.output is not None and r.output.data == 0, (r.error, r.output)


def where_am_i() -> dict[str, object]:
    """Its PID, and the memory cgroup it runs in."""
    with open("/proc/self/cgroup") as f:
        group = next((line.rstrip("\n").split(":", 2)[2] for line in f if ":memory:" in line), "")
    return {"pid": os.getpid(), "group": group}


@pytest.mark.parametrize("how", ["refused", "unavailable"])
def test_where_the_template_cannot_clone_a_sandbox_the_spare_enters_it_itself(
        how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The template clones a sandbox's first process into its namespaces; where the kernel refuses that
    clone, or it cannot be used here (``forking.can_clone``), a spare is forked and enters the sandbox
    itself (``sandbox.enter``): the call still runs as PID 1 of its namespace, in its own cgroup."""
    from toolfork.governance import cgroup, forking

    def refuse(namespaces: int) -> int:
        raise OSError(1, "clone refused (test)")

    if how == "refused":
        monkeypatch.setattr(forking, "_clone", refuse)  # the template is forked from here: it has this one
    else:
        monkeypatch.setattr(forking, "can_clone", lambda: False)
    limits = Limits(network=False, memory_mb=256, processes=8) if cgroup.probe().ok else Limits(network=False)
    with Executor([Tool("where_am_i", fn=where_am_i, limits=limits)], workers=1, timeout=30) as ex:
        results = ex.run([{"id": str(i), "name": "where_am_i", "arguments": {}} for i in range(3)])
    assert all(r.status == "ok" and r.output is not None for r in results), [r.error for r in results]
    outs = [r.output.data for r in results if r.output is not None]
    assert [o["pid"] for o in outs] == [1, 1, 1], outs
    if cgroup.probe().ok:
        assert all(f"/{r.worker_pid}" in str(o["group"]) and cgroup.PREFIX in str(o["group"])
                   for r, o in zip(results, outs, strict=True)), outs


def stop_the_template(after_s: float) -> str:
    """A warm tool that stops its worker's parent (the template) a little after it starts."""
    import signal
    import time

    time.sleep(after_s)
    os.kill(os.getppid(), signal.SIGSTOP)
    return "stopped it"


def test_a_stopped_template_does_not_let_a_sandboxed_calls_children_run_past_cpu_s() -> None:
    """The template polls the CPU of the sandboxes it cloned: a warm tool that stops it must not give a
    sandboxed call's children unbounded CPU. The host replaces a stopped template and kills its workers,
    so the call ends (crashed, naming the template) or is named LimitExceeded; never ``ok``."""
    from toolfork.governance import cgroup

    from .whole_call import busy_children

    if not cgroup.probe().ok:
        pytest.skip(f"no cgroup counts a call's children here: {cgroup.probe().reason}")
    tools = [Tool("busy_children", fn=busy_children, limits=Limits(cpu_s=1, sandbox=True)),
             Tool("stop_the_template", fn=stop_the_template)]
    with Executor(tools, workers=2, timeout=60) as ex:
        results = ex.run([{"id": "boxed", "name": "busy_children", "arguments": {}},
                          {"id": "warm", "name": "stop_the_template", "arguments": {"after_s": 0.3}}])
    boxed = results[0]
    assert boxed.status != "ok", boxed.output
    assert boxed.error is not None and (boxed.error.type == "LimitExceeded" or "template" in boxed.error.message), \
        boxed.error


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_warm_tool_that_stops_or_kills_the_spare_maker_leaves_every_later_call_sandboxed(
        attack: Callable[[str, str], dict[str, Any]], user: str, how: str) -> None:
    """The spare maker clones the sandboxes' first processes for the template, and a warm tool of the same
    pool can signal it. Stopped, the template waits for it at most ``ANSWER_S``, kills it and clones its
    spares itself from then on; killed, it is replaced. Every later call still runs as PID 1 of its own
    sandbox (its own cgroup where one is given, no_new_privs, seccomp), and none waits for long."""
    from toolfork.executor.backends.fork.template_maker import ANSWER_S

    ev = attack(f"spare_maker_{how}", user)
    assert len(ev["hit"]) == 1, ev  # the pool had one maker, and the warm tool reached it
    calls = ev["calls"]
    assert [c["status"] for c in calls] == ["ok"] * 5, calls
    for c in calls:
        out = c["out"]
        assert (out["pid"], out["no_new_privs"], out["seccomp"]) == (1, "1", "2"), c
        if ev["cgroup"]:
            assert f"/{c['worker_pid']}" in out["group"], c
    assert ev["took_s"] < ANSWER_S + 10, ev  # a stopped maker costs one wait (30 s per call without it)
    if how == "stopped":
        assert ev["left"] == [], ev  # killed, and no other made
    else:
        assert len(ev["left"]) == 1 and ev["left"] != ev["hit"], ev


def start_daemon(pid_file: str) -> str:
    """A warm tool: double-fork a daemon in a session of its own that ignores SIGTERM, then hang."""
    import signal
    import time

    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(pid_file + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pid_file + ".tmp", pid_file)
            time.sleep(600)
        os._exit(0)
    while True:
        time.sleep(0.05)


def test_a_warm_calls_daemon_dies_at_its_timeout_while_sandboxed_calls_stream(tmp_path: Any) -> None:
    """The spare maker's clones are the template's children before the template has read their
    announcement, so the template kills no leftover while a spare is asked; a stream of sandboxed calls
    (always asking) must not keep a timed-out warm call's daemon alive."""
    import time

    pid_file = str(tmp_path / "daemon.pid")
    tools = [Tool("boxed", fn=where_am_i, limits=Limits(network=False)), Tool("daemon", fn=start_daemon)]
    with Executor(tools, workers=2, timeout=30, kill_grace=0.2) as ex:
        ex.run([{"id": "first", "name": "boxed", "arguments": {}}])  # the maker and spares are made
        calls = [{"id": "d", "name": "daemon", "arguments": {"pid_file": pid_file}, "timeout": 1.0}]
        calls += [{"id": str(i), "name": "boxed", "arguments": {}} for i in range(40)]
        results = ex.run(calls)
        assert results[0].status == "timeout", results[0]
        assert all(r.status == "ok" for r in results[1:]), [r.error for r in results[1:] if r.status != "ok"]
        with open(pid_file) as f:
            daemon = int(f.read())
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{daemon}") and time.monotonic() < deadline:
            ex.run([{"id": "more", "name": "boxed", "arguments": {}}])  # spares are asked meanwhile
        alive = os.path.exists(f"/proc/{daemon}")
    assert not alive, "the daemon of the timed-out call outlived it while sandboxed calls ran"
