"""Sandboxed sessions: every sandbox promise holds for a session's whole life, as root and as nobody.

Each scenario of ``session_attacks`` runs once per user in a fresh interpreter (a session opened with
``Limits(network=False, write_paths=[WORK/ws])``, ``checkpoint=True``, and a tool that runs unrestricted
Python against the session's state); the tests below judge its effects from the host. On the tree before
sandboxed sessions every scenario fails at its first line: ``ex.session(..., limits=...)`` passed
``limits`` on to the factory (``dict(limits=...)``, no sandbox at all), and a sandboxed tool was refused
in a session (``LimitsNotEnforceable``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import shared_dir
from tests.redteam.sandbox.conftest import USERS, run_scenario

MODULE = "tests.redteam.sandbox.session_attacks"


@pytest.fixture(scope="module")
def seen() -> Iterator[Callable[[str, str], dict[str, Any]]]:
    """What scenario NAME reported as USER (each run once for the module)."""
    done: dict[tuple[str, str], dict[str, Any]] = {}
    with shared_dir("toolfork-sbsession-", "the sandboxed-session attacks") as base:
        def get(name: str, user: str) -> dict[str, Any]:
            if (name, user) not in done:
                work = base / f"{name}-{user}"
                work.mkdir()
                work.chmod(0o777)
                done[name, user] = run_scenario(name, user, work, module=MODULE)
                assert done[name, user]["leftover_children"] == [], done[name, user]
            return done[name, user]

        yield get


def _ok(r: dict[str, Any]) -> Any:
    assert r["status"] == "ok", r
    return r["data"]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_state_persists_inside_the_sandbox_and_faults_roll_it_back(user: str, seen: Any) -> None:
    """The factory and every call run inside (PID namespace, minimal environment, the host's secret
    absent); a crash and a timeout each give the model a clear status, and the next call sees the state
    as it was before the failed one."""
    s = seen("basics", user)
    n, pid, env = _ok(s["first"])
    assert n == 1 and pid != s["pid_outside"] and pid < 10, s["first"]  # a small pid: its own namespace
    assert env == ["LANG", "PATH"], env  # TOOLFORK_SESSION_SECRET, set in the host, is not there
    assert _ok(s["second"]) == 2
    assert s["crash"]["status"] == "crashed" and "exited with code 3" in s["crash"]["error"]
    assert _ok(s["after_crash"]) == 2
    assert s["timeout"]["status"] == "timeout"
    assert _ok(s["after_timeout"]) == 2
    assert s["snapshot_n"] == 2 and s["restores"] == 2


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_cpu_memory_and_processes_bound_the_session_or_it_is_refused(user: str, seen: Any) -> None:
    """cpu_s per call over every process of the call (two children spinning with their parent);
    memory_mb over the session (45 MB kept per cell, across cells); processes over the session (a fork
    bomb). Each hit is LimitExceeded and rolled back. Where no cgroup can be had (nobody here) the
    session is refused at open, naming why."""
    s = seen("budgets", user)
    if "refused" in s:
        assert user == "nobody", s
        assert "cgroup" in s["refused"] and "cpu_s" in s["refused"], s
        return
    assert s["spin_children"]["status"] == "error" and "CPU time limit" in s["spin_children"]["error"], s
    assert _ok(s["after_spin"]) == 1
    grown = [g for g in s["grow"] if g["status"] == "ok"]
    hit = [g for g in s["grow"] if g["status"] != "ok"]
    assert hit and "LimitExceeded" in hit[0]["error"] and "memory limit of 150 MB" in hit[0]["error"], s["grow"]
    assert _ok(s["after_grow"]) == len(grown) and len(grown) <= 3, s
    made, err = _ok(s["bomb"])
    assert made <= 6 and err == 11, s["bomb"]  # EAGAIN at the session's pids.max
    assert _ok(s["after_bomb"]) == 0


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_frames_and_junk_into_every_descriptor_reach_no_other_session(user: str, seen: Any) -> None:
    """Session B writes a well-formed result frame and junk into every descriptor it holds: it breaks
    at most itself; session A's next call is A's own, and the pool goes on."""
    s = seen("descriptors", user)
    assert _ok(s["a1"]) == "a-state-123"
    assert _ok(s["a2"]) == "a-state-123", s
    assert s["pool"] == "ok"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_signals_reach_neither_the_host_nor_the_template_nor_another_session(user: str, seen: Any) -> None:
    """SIGSTOP to the host's pid, the template's, session A's, its parent, 1 and -1: only processes of
    its own sandbox are there to receive one (its keeper ignores them); everything outside runs on."""
    s = seen("descriptors", user)
    assert s["host_state"] in ("R", "S") and s["template_state"] in ("R", "S"), s
    assert s["a_state"] in ("R", "S"), s
    assert _ok(s["c_after"]) == "c goes on"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_another_open_sessions_state_cannot_be_read(user: str, seen: Any) -> None:
    """Session C reads /proc of A's pid (as the host names it) and of every low pid: it sees its own
    sandbox's processes only, never A's state."""
    s = seen("descriptors", user)
    found = _ok(s["c_reads"])
    assert not any(s["secret_hex"] in blob for blob in found), "session C read session A's state"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_no_network_to_the_hosts_listeners(user: str, seen: Any) -> None:
    s = seen("outside", user)
    assert s["tcp"]["status"] == "error" and s["unix"]["status"] == "error", s
    assert s["tcp_accepted"] is False and s["unix_accepted"] is False
    assert s["dgram"]["status"] == "error" and s["dgram_got"] is None, s  # a datagram pair's sendto


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_nothing_outside_write_paths_changes(user: str, seen: Any) -> None:
    """Write, append, chmod 0777 and utime on files outside the workspace fail; the files are unchanged
    in the host; the workspace itself is writable."""
    s = seen("outside", user)
    for attack in ("write", "chmod", "utime", "append"):
        assert s[attack]["status"] == "error", (attack, s[attack])
    assert s["outside_exists"] is False
    assert s["victim"] == ["0o644", True, "host"], s["victim"]
    assert s["inside"]["status"] == "ok"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_daemons_the_session_starts_are_gone_after_close(user: str, seen: Any) -> None:
    """A double-forked setsid daemon writing a heartbeat and a program in a session of its own live while
    the session is open, and are gone once it is closed."""
    s = seen("outside", user)
    assert _ok(s["daemon"]) == "started"
    assert s["beats_open"] > 0
    before, after = s["beats_after_close"]
    assert before == after, "the daemon still beats after close()"
    assert s["sleep_alive"] is False


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_an_object_whose_unpickling_runs_code_arrives_as_data_or_fails_cleanly(user: str, seen: Any) -> None:
    """As a call's result and inside the state sent by snapshot(): nothing is unpickled in the host."""
    s = seen("outside", user)
    assert s["evil_result"]["status"] == "error" and "not data" in s["evil_result"]["error"], s
    assert s["planted"] == "ok" and "not data" in s["evil_snapshot"], s["evil_snapshot"]
    assert s["unpickled"] is False


def test_a_sandboxed_session_is_refused_where_no_sandbox_can_be_had() -> None:
    """Sequential mode has no sandbox: refused at open, naming why; Limits that ask for no sandbox are
    a mistake, named."""
    from toolfork import Limits
    from toolfork.executor import Executor
    from toolfork.governance.enforceable import LimitsNotEnforceable

    with Executor([], mode="sequential") as ex:
        with pytest.raises(LimitsNotEnforceable, match="sandbox"):
            ex.session(dict, limits=Limits(network=False))
    with Executor([], mode="fork", workers=1) as ex:
        with pytest.raises(ValueError, match="must ask for it"):
            ex.session(dict, limits=Limits(memory_mb=10))
        with pytest.raises(TypeError, match=r"toolfork\.Limits"):
            ex.session(dict, limits={"network": False})


def test_a_tool_asking_for_another_sandbox_is_refused_in_a_session(tmp_path: Path) -> None:
    """A tool whose own Limits ask for network=False runs in a session whose sandbox has it; in one
    that has only write_paths, its sandbox differs: refused, naming both."""
    from tests.redteam.sandbox.session_attacks import cell
    from toolfork import Limits
    from toolfork.executor import Executor, ToolCall

    with Executor([cell], mode="fork", workers=1, limits=Limits(network=False)) as ex:
        with ex.session(dict, limits=Limits(write_paths=[str(tmp_path)])) as s:
            r = s.run([ToolCall("a", "cell", {"code": "out = 1"})])[0]
        assert r.status == "error" and r.error is not None and r.error.type == "LimitsNotEnforceable", r
        assert "another sandbox" in r.error.message
        with ex.session(dict, limits=Limits(network=False, write_paths=[str(tmp_path)])) as s:
            assert s.run([ToolCall("b", "cell", {"code": "out = 2"})])[0].output.data == 2  # type: ignore[union-attr]
    with Executor([cell], mode="fork", workers=1, limits=Limits(cpu_s=5)) as ex:  # a bound the session lacks
        with ex.session(dict, limits=Limits(network=False)) as s:
            r = s.run([ToolCall("c", "cell", {"code": "out = 3"})])[0]
        assert r.status == "error" and r.error is not None and "cpu_s=5.0" in r.error.message, r


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_spans_a_session_tool_forges_are_bound_to_its_call(user: str, seen: Any) -> None:
    """Another tenant's trace id and parent, toolfork's own scope, a self-parent: rebound into the call's
    trace under its span, in the ``sandboxed-tool`` scope, clamped into the call; the -5 ns one dropped."""
    from tests.redteam.sandbox.telemetry import FOREIGN_TRACE, FORGED_IDS

    s = seen("spans", user)
    assert s["status"] == "ok", s
    by_name = {x["name"]: x for x in s["spans"]}
    call, batch = by_name["execute_tool hostile"], by_name["batch"]
    forged = [x for x in s["spans"] if x["scope"] == "sandboxed-tool"]
    assert {x["name"] for x in forged} == {"execute_tool transfer_funds", "child of the forged span", "loops"}
    own = {x["span_id"] for x in forged}
    for x in forged:
        assert x["trace_id"] == batch["trace_id"] != FOREIGN_TRACE, x
        assert x["span_id"] not in FORGED_IDS, x
        assert x["parent_id"] == call["span_id"] or x["parent_id"] in own, x
        assert call["start"] <= x["start"] <= x["end"] <= call["end"], (x, call)


def _started(pid: int) -> int:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat's 22nd field)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[19])


def test_a_second_session_of_a_sandbox_opens_on_a_process_that_entered_it_ahead(tmp_path: Path) -> None:
    """Once a session of a sandbox opened, a spare enters that sandbox ahead: the next session's process
    (its sandbox's outer) started before the next ``session()`` was called, and works inside."""
    import subprocess
    import time

    from tests.redteam.sandbox.session_attacks import cell
    from toolfork import Limits
    from toolfork.executor import Executor, ToolCall

    limits = Limits(network=False, write_paths=[str(tmp_path)])
    with Executor([cell], mode="fork", workers=1) as ex:
        with ex.session(dict, limits=limits) as first:
            first.run([ToolCall("a", "cell", {"code": "out = 1"})])
        time.sleep(0.5)  # the spare enters meanwhile
        marker = subprocess.Popen(["sleep", "5"])
        try:
            time.sleep(0.1)
            with ex.session(dict, limits=limits) as second:
                assert second.pid is not None and _started(second.pid) <= _started(marker.pid)
                r = second.run([ToolCall("b", "cell", {"code": "import os\nout = os.getpid()"})])[0]
                assert r.status == "ok" and r.output is not None and r.output.data < 10, r  # in its namespace
        finally:
            marker.kill()
            marker.wait()


def test_cancelling_arun_of_a_sandboxed_session_stops_its_call(tmp_path: Path) -> None:
    """The task awaiting ``arun`` is cancelled while its cell spins: the keeper kills the call's process
    (the session is lost, as any session whose arun is cancelled), and the executor goes on."""
    import asyncio

    from tests.redteam.sandbox.session_attacks import cell
    from toolfork import Limits
    from toolfork.executor import Executor, SessionLost, ToolCall

    async def cancel(s: Any) -> None:
        task = asyncio.ensure_future(s.arun([ToolCall("spin", "cell", {"code": "while True: pass"})]))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with Executor([cell], mode="fork", workers=1, timeout=60) as ex:
        with ex.session(dict, limits=Limits(network=False, write_paths=[str(tmp_path)])) as s:
            asyncio.run(cancel(s))
            with pytest.raises(SessionLost):
                s.run([ToolCall("after", "cell", {"code": "out = 1"})])
        assert ex.run([ToolCall("p", "cell", {"code": "out = 2"})])[0].output.data == 2  # type: ignore[union-attr]


def test_a_factory_outside_read_paths_imported_late_opens_and_runs_inside(tmp_path: Path) -> None:
    """The factory's module was imported after the executor started and lies outside ``read_paths``: the
    session's process (a spare that entered ahead, from the second open on) loads the factory before its
    paths are locked, and the factory still runs inside."""
    import importlib
    import sys

    from tests.redteam.conftest import REPO
    from tests.redteam.sandbox.session_attacks import cell
    from toolfork import Limits
    from toolfork.executor import Executor, ToolCall

    home = tmp_path / "mods"
    home.mkdir()
    (home / "late_factory_mod.py").write_text("def make():\n    return {'n': 41}\n")
    reads = sorted({sys.prefix, sys.base_prefix, str(REPO), "/usr", "/lib", "/etc"})
    limits = Limits(network=False, read_paths=reads, write_paths=[str(tmp_path / "ws")])
    (tmp_path / "ws").mkdir()
    sys.path.insert(0, str(home))  # every process has it; the module is imported only after they start
    with Executor([cell], mode="fork", workers=1, timeout=60) as ex:
        try:
            make = importlib.import_module("late_factory_mod").make
            for _ in range(2):  # the second open finds a spare that entered ahead
                with ex.session(make, limits=limits) as s:
                    r = s.run([ToolCall("a", "cell", {"code": "import os\nout = [n, os.getpid()]"})])[0]
                assert r.status == "ok" and r.output is not None and r.output.data[0] == 41, r
                assert r.output.data[1] < 10, r  # inside its own PID namespace
        finally:
            sys.path.remove(str(home))
            sys.modules.pop("late_factory_mod", None)


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_the_keeper_of_a_lost_session_left_open_waits_without_spinning(tmp_path: Path) -> None:
    """A sandboxed session without checkpoint loses its process and is left open: its keeper (PID 1 of
    the sandbox, the outer's child) uses no CPU while it waits for the session to be closed."""
    import time

    from tests.redteam.sandbox.session_attacks import cell
    from toolfork import Limits
    from toolfork.executor import Executor, ToolCall

    with Executor([cell], mode="fork", workers=1, timeout=60) as ex:
        with ex.session(dict, limits=Limits(network=False, write_paths=[str(tmp_path)])) as s:
            assert s.run([ToolCall("a", "cell", {"code": "import os\nos._exit(1)"})])[0].status == "crashed"
            assert s.pid is not None
            with open(f"/proc/{s.pid}/task/{s.pid}/children") as f:
                keeper = int(f.read().split()[0])
            before = _cpu_ticks(keeper)
            time.sleep(1.0)
            assert _cpu_ticks(keeper) - before <= 5, "the keeper spins while the lost session stays open"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_a_spare_fits_a_session_of_any_paths_and_its_open_locks_them(user: str, seen: Any) -> None:
    """A spare enters the sandbox ahead without read_paths/write_paths and the OPEN of the session that
    takes it locks that session's: session b (a workspace of its own) opens on a spare that entered after
    session a, writes only b, reads nothing of a's nor beside them, and keeps that after a rollback.
    Before spares fitted any paths, b's process was forked at its open (no spare had b's Limits)."""
    s = seen("spare_paths", user)
    assert s["a_write"]["status"] == "ok", s
    assert s["b_from_spare"] is True, s
    assert _ok(s["b_write"]) == "wrote"
    assert _ok(s["b_pid"]) < 10  # inside its own PID namespace
    for attack in ("b_write_a", "b_read_a", "b_read_beside", "b_write_a_after_rollback"):
        said = s[attack]["error"] or ""
        assert s[attack]["status"] == "error" and ("PermissionError" in said or "Read-only file system" in said), (
            attack, s[attack])
    assert s["b_after_timeout"]["status"] == "timeout", s
    assert s["a_files"] == ["a_secret.txt", "in_a.txt"] and s["b_files"] == ["in_b.txt"], s


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_a_session_opened_ahead_was_locked_before_its_factory_ran_and_fits_its_own_limits_only(
        user: str, seen: Any) -> None:
    """``Executor.session_ahead`` opens a session before anyone asks for it (the code interpreter's next
    episode): its factory, run ahead, already ran with no_new_privs, seccomp in filter mode and Landlock
    (a file beside its workspace neither readable nor writable), and every cell after it is held to its
    own workspace. A session whose Limits differ from those opened ahead (another workspace) is not handed
    that one: its factory ran at its own open, held to its own workspace; the one opened ahead is let go
    unused (its ``on_discard`` once) when its executor closes. On the tree before, ``session_ahead`` did
    not exist (the scenario fails at its first use)."""
    s = seen("ahead", user)
    assert s["kept"] is True, s
    assert s["a_built_before_open"] is True and s["b_built_before_open"] is False, s
    for factory in ("a_factory", "b_factory"):
        nnp, mode, read, write = _ok(s[factory])
        assert nnp == "1" and mode == "2" and read == "EACCES" and write in ("EACCES", "EROFS"), (factory, s)
    assert _ok(s["a_write_a"]) == "wrote" and _ok(s["b_write_b"]) == "wrote"
    for attack in ("a_write_b", "a_read_beside", "b_write_a"):
        said = s[attack]["error"] or ""
        assert s[attack]["status"] == "error" and ("PermissionError" in said or "Read-only file system" in said), (
            attack, s[attack])
    assert s["discarded_before_close"] == 0 and s["discarded"] == 1, s
    assert s["a_files"] == ["in_a.txt"] and s["b_files"] == ["in_b.txt"], s


def test_a_spare_refuses_an_open_whose_limits_differ_from_what_it_entered_but_for_the_paths(tmp_path: Path) -> None:
    """The host takes a spare by the session's Limits less its paths; the spare checks it too: an OPEN
    whose Limits differ elsewhere (here the environment passed on) from those it entered ahead is
    refused, naming why, and its factory never runs (the marker file stays absent)."""
    import pickle

    from toolfork import Limits
    from toolfork.executor import Executor
    from toolfork.executor.backends.fork.pool import ForkBackend
    from toolfork.executor.backends.fork.session_link import SessionProcessLink

    ws = tmp_path / "ws"
    ws.mkdir()
    entered = Limits(network=False, write_paths=[str(ws)])
    other = Limits(network=False, write_paths=[str(ws)], env=["HOME"])
    marker = ws / "factory_ran"
    with Executor([], mode="fork", workers=1) as ex:
        backend = ex.backend
        assert isinstance(backend, ForkBackend)
        link = SessionProcessLink(backend.core, ex.governance, 1.0)
        try:
            link.enter(entered)
            blob = pickle.dumps((marker.write_text, ("x",), {}))
            error = link.open(blob, False, 30, other)
        finally:
            link.close()
    assert error is not None and error.type == "LimitsNotEnforceable", error
    assert "not those its spare entered ahead" in error.message, error
    assert not marker.exists()


@pytest.mark.parametrize("deaf", [False, True])
def test_a_timed_out_cell_is_rolled_back_by_the_resume_sent_with_its_kill(tmp_path: Path, deaf: bool) -> None:
    """At a timeout the host sends the checkpoint's channels with the kill; the keeper resumes the
    checkpoint as soon as it reaps the cell's process, whether SIGTERM ended it or (a cell that ignores
    SIGTERM) the SIGKILL after the grace: each time the next cell sees the state from before."""
    from tests.redteam.sandbox.session_attacks import cell
    from toolfork import Limits
    from toolfork.executor import Executor, ToolCall

    ignore = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if deaf else ""
    with Executor([cell], mode="fork", workers=1, timeout=60, kill_grace=0.3) as ex:
        with ex.session(dict, limits=Limits(network=False, write_paths=[str(tmp_path)]), checkpoint=True) as s:
            s.run([ToolCall("a", "cell", {"code": "n = 1"})])
            for i in range(3):
                r = s.run([ToolCall(f"t{i}", "cell", {"code": f"{ignore}n = -1\nwhile True: pass"}, timeout=0.3)])[0]
                assert r.status == "timeout", r
                after = s.run([ToolCall(f"n{i}", "cell", {"code": "n += 1\nout = n"})])[0]
                assert after.status == "ok" and after.output is not None and after.output.data == i + 2, after
            assert s.restores == 3 and s.lost is None
