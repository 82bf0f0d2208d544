"""Limits on the Executor, end to end: real forked workers, real rlimits, a real network namespace and
Landlock domain, no mocks. A call that hits a limit comes back "error" / LimitExceeded naming it, the
other calls of its batch are untouched, the worker is either fine afterwards or replaced, limits are
the worker's only for the call, restrictions only ever bind a one-shot process, and what cannot be
enforced (or is written wrong) is refused before any process starts.

Timings are lower bounds only (CI machines are loaded); upper bounds are generous sanity checks."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import socket
import sys
import sysconfig
import time
from pathlib import Path

import psutil
import pytest

from tests.governance.executors import MIB, Executors, PongServer, call, text
from tests.procs import all_gone
from toolfork import Limits, LimitsNotEnforceable, Tool, tool
from toolfork.governance import LimitExceededError, LimitsError
from toolfork.governance.rlimits import probe as rlimit_probe
from toolfork.tools.errors import ToolDefinitionError

# ---------------------------------------------------------------- the tools (module level: forked workers have them)

def hog(mb: int) -> str:
    """Allocate ``mb`` MiB (calloc'd: address space that RLIMIT_DATA counts, pages never touched)."""
    data = bytes(mb * MIB)
    return f"{len(data) // MIB}"


def echo(value: str) -> str:
    """Return ``value``."""
    return value


def whoami() -> str:
    """The pid of the process the call ran in."""
    return str(os.getpid())


def spin(cpu_s: float) -> str:
    """Burn ``cpu_s`` seconds of CPU time."""
    start = time.process_time()
    while time.process_time() - start < cpu_s:
        pass
    return f"{time.process_time() - start:.2f}"


def stubborn(cpu_s: float) -> str:
    """Burn ``cpu_s`` seconds of CPU, swallowing the CPU limit's error each time it comes (a minute of
    wall time at most)."""
    start, end = time.process_time(), time.monotonic() + 60
    caught = 0
    while time.process_time() - start < cpu_s and time.monotonic() < end:
        try:
            while time.process_time() - start < cpu_s and time.monotonic() < end:
                pass
        except LimitExceededError:
            caught += 1
    return f"survived, caught {caught}"


def write_file(path: str, mb: int) -> str:
    """Write ``mb`` MiB to ``path``, one MiB at a time."""
    chunk = b"x" * MIB
    with open(path, "wb") as f:
        for _ in range(mb):
            f.write(chunk)
    return f"{os.path.getsize(path) // MIB}"


def open_many(n: int) -> str:
    """Open /dev/null ``n`` times at once (and close them all)."""
    with contextlib.ExitStack() as stack:
        for _ in range(n):
            stack.enter_context(open(os.devnull, "rb"))
        return f"{n}"


def fetch(port: int) -> str:
    """Connect to 127.0.0.1:``port`` and return what the server says."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"ping")
        return s.recv(16).decode()


def read_text(path: str) -> str:
    """Read a text file."""
    with open(path) as f:
        return f.read()


def write_text(path: str, value: str) -> str:
    """Write a text file."""
    with open(path, "w") as f:
        f.write(value)
    return "written"


def fork_children(n: int) -> str:
    """Fork ``n`` children that sleep a moment, then reap them."""
    pids = []
    try:
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                time.sleep(0.5)
                os._exit(0)
            pids.append(pid)
    finally:
        for pid in pids:
            os.waitpid(pid, 0)
    return f"{len(pids)}"


def limited(name: str, fn: object, limits: Limits | None = None, **settings: object) -> Tool:
    return Tool(name, fn=fn, limits=limits, **settings)  # type: ignore[arg-type]


def is_limit(r: object, message: str) -> bool:
    error = getattr(r, "error", None)
    return (getattr(r, "status", None) == "error" and error is not None and error.type == "LimitExceeded"
            and message in error.message)


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


# ---------------------------------------------------------------- limits inside a call

def test_a_memory_hog_gets_limit_exceeded_and_the_rest_of_its_batch_is_untouched(executors: Executors) -> None:
    tools = [limited("hog", hog, Limits(memory_mb=256)), limited("echo", echo)]
    ex = executors(tools, workers=2)
    results = executors.run(ex, [call(1, "hog", mb=2048), call(2, "echo", value="a"), call(3, "echo", value="b"),
                                 call(4, "echo", value="c")])
    assert results[0].status == "error" and results[0].error is not None
    assert results[0].error.type == "LimitExceeded"
    assert results[0].error.message == "tool 'hog': memory limit of 256 MB exceeded"
    assert [text(r) for r in results[1:]] == ["a", "b", "c"]
    # The worker that hit it (kept or replaced) serves later calls right, the limited tool included.
    later = executors.run(ex, [call(5, "hog", mb=64), call(6, "echo", value="d"), call(7, "hog", mb=2048),
                               call(8, "echo", value="e")])
    assert text(later[0]) == "64" and text(later[1]) == "d" and text(later[3]) == "e"
    assert is_limit(later[2], "memory limit of 256 MB exceeded")


def test_a_busy_loop_ends_at_its_cpu_limit(executors: Executors) -> None:
    ex = executors([limited("spin", spin, Limits(cpu_s=1)), limited("echo", echo)], workers=2)
    started = time.monotonic()
    spun, after = executors.run(ex, [call(1, "spin", cpu_s=30), call(2, "echo", value="fine")])
    elapsed = time.monotonic() - started
    assert is_limit(spun, "tool 'spin': CPU time limit of 1 s exceeded"), spun.error
    assert spun.duration_s >= 0.8, spun.duration_s
    assert spun.duration_s < 15, spun.duration_s  # stopped, not the 30 s of CPU it asked for
    assert elapsed < 30, elapsed
    assert text(after) == "fine"


def test_a_big_write_stops_at_the_file_size_limit(executors: Executors, tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    ex = executors([limited("writer", write_file, Limits(file_size_mb=8))], workers=1)
    (r,) = executors.run(ex, [call(1, "writer", path=str(target), mb=100)])
    assert is_limit(r, "tool 'writer': file size limit of 8 MB exceeded"), r.error
    assert 0 < target.stat().st_size <= 8 * MIB
    # The worker (SIGXFSZ caught, not killed by it) writes a small file next.
    (small,) = executors.run(ex, [call(2, "writer", path=str(tmp_path / "small.bin"), mb=2)])
    assert text(small) == "2"


def test_opening_too_many_files_names_the_open_files_limit(executors: Executors) -> None:
    ex = executors([limited("opener", open_many, Limits(open_files=16))], workers=1)
    many, few = executors.run(ex, [call(1, "opener", n=100), call(2, "opener", n=8)])
    assert is_limit(many, "open files"), many.error
    assert many.error is not None and many.error.message == "tool 'opener': open files limit of 16 exceeded"
    assert text(few) == "8"  # the budget is on top of what the worker holds


def test_a_tool_that_swallows_the_cpu_limit_is_still_reported_and_the_next_call_is_fine(
        executors: Executors) -> None:
    ex = executors([limited("stubborn", stubborn, Limits(cpu_s=0.5)), limited("echo", echo),
                    limited("whoami", whoami)], workers=1)
    results = executors.run(ex, [call(1, "stubborn", cpu_s=10), call(2, "echo", value="next"),
                                 call(3, "whoami")])
    r = results[0]
    assert is_limit(r, "tool 'stubborn': CPU time limit of 0.5 s exceeded"), (r.status, r.error, r.output)
    assert r.output is None  # its "survived" is not what the caller sees
    assert text(results[1]) == "next"
    assert int(text(results[2])) > 0
    # The kernel's SIGXCPU, a second or two of CPU past the timer, ended it long before its 10 s of CPU.
    assert r.error is not None and "SIGXCPU" in r.error.message, r.error.message
    assert r.duration_s < 60


def worker_limits() -> str:
    """The worker's soft and hard rlimits, its CPU-timer and its limit-signal handlers, as text."""
    import resource
    import signal

    names = ("RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC")
    parts = [f"{n}={resource.getrlimit(getattr(resource, n))}" for n in names]
    parts.append(f"itimer_prof={signal.getitimer(signal.ITIMER_PROF)}")
    parts += [f"{s.name}={signal.getsignal(s)!r}" for s in (signal.SIGXCPU, signal.SIGPROF, signal.SIGXFSZ)]
    return " ".join(parts)


def test_limits_are_restored_after_the_call_in_the_same_worker(executors: Executors, tmp_path: Path) -> None:
    tools = [limited("hog_small", hog, Limits(memory_mb=64)), limited("hog", hog),
             limited("writer_small", write_file, Limits(file_size_mb=1)), limited("writer", write_file),
             limited("opener_small", open_many, Limits(open_files=8)), limited("opener", open_many),
             limited("spin_small", spin, Limits(cpu_s=0.5)), limited("whoami", whoami),
             limited("all_small", spin, Limits(memory_mb=64, cpu_s=5, file_size_mb=1, open_files=8)),
             limited("worker_limits", worker_limits)]
    ex = executors(tools, workers=1)
    (before,) = executors.run(ex, [call(0, "worker_limits")])
    results = executors.run(ex, [
        call(1, "hog_small", mb=512), call(2, "hog", mb=1024),
        call(3, "writer_small", path=str(tmp_path / "a.bin"), mb=4),
        call(4, "writer", path=str(tmp_path / "b.bin"), mb=20),
        call(5, "opener_small", n=100), call(6, "opener", n=100),
        call(7, "spin_small", cpu_s=30), call(8, "all_small", cpu_s=0.1),
        call(9, "worker_limits"), call(10, "whoami"),
    ])
    assert is_limit(results[0], "memory limit of 64 MB exceeded"), results[0].error
    assert text(results[1]) == "1024"
    assert is_limit(results[2], "file size limit of 1 MB exceeded"), results[2].error
    assert text(results[3]) == "20" and (tmp_path / "b.bin").stat().st_size == 20 * MIB
    assert is_limit(results[4], "open files limit of 8 exceeded"), results[4].error
    assert text(results[5]) == "100"
    assert is_limit(results[6], "CPU time limit of 0.5 s exceeded"), results[6].error
    assert float(text(results[7])) >= 0.1
    # After limited calls (some that hit their limit, one that did not), the worker's rlimits, CPU timer
    # and signal handlers are what they were before them.
    assert text(results[8]) == text(before)
    # One worker served them all: the limits were lifted from it, not left behind with a new process.
    assert len({r.worker_pid for r in [before, *results]}) == 1
    assert int(text(results[9])) == before.worker_pid


def test_the_executors_default_limits_apply_to_every_tool_and_a_tools_own_field_wins(
        executors: Executors) -> None:
    tools = [limited("own", hog, Limits(memory_mb=1024)), limited("plain", hog),
             limited("spin_own", spin, Limits(memory_mb=1024))]
    ex = executors(tools, workers=2, limits=Limits(memory_mb=64, cpu_s=1))
    own, plain, small, spun = executors.run(ex, [call(1, "own", mb=512), call(2, "plain", mb=512),
                                                 call(3, "plain", mb=16), call(4, "spin_own", cpu_s=30)])
    assert text(own) == "512"
    assert is_limit(plain, "tool 'plain': memory limit of 64 MB exceeded"), plain.error
    assert text(small) == "16"
    # The default's other fields still hold for a tool that set only memory_mb.
    assert is_limit(spun, "tool 'spin_own': CPU time limit of 1 s exceeded"), spun.error


# ---------------------------------------------------------------- restrictions: network, paths

def test_network_false_cannot_reach_a_local_server_that_an_unlimited_call_reaches(executors: Executors) -> None:
    ex = executors([limited("fetch", fetch), limited("fetch_offline", fetch, Limits(network=False))], workers=2)
    server = PongServer()
    try:
        online, offline, again = executors.run(ex, [call(1, "fetch", port=server.port),
                                                    call(2, "fetch_offline", port=server.port),
                                                    call(3, "fetch", port=server.port)])
    finally:
        server.close()
    assert text(online) == "pong" and text(again) == "pong"
    assert offline.status == "error" and offline.error is not None
    assert re.search(r"network|unreachable", offline.error.message, re.IGNORECASE), offline.error
    assert server.served == 2


def test_sandboxes_with_and_without_network_alternate_in_one_pool(executors: Executors) -> None:
    """As root, the process that makes the sandboxes clones those without network into one empty network
    namespace and comes back to its own for those with it: alternated, each call gets what it asked."""
    ex = executors([limited("offline", fetch, Limits(network=False)), limited("online", fetch, Limits(sandbox=True))],
                   workers=2)
    server = PongServer()
    try:
        results = [r for _ in range(2) for r in executors.run(
            ex, [call(i, "offline" if i % 2 == 0 else "online", port=server.port) for i in range(6)])]
    finally:
        server.close()
    for i, r in enumerate(results):
        if i % 2:
            assert text(r) == "pong", r
        else:
            assert r.status == "error" and r.error is not None and "unreachable" in r.error.message, r
    assert server.served == 6


def try_fetch(port: int) -> str:
    """"PID pong" if 127.0.0.1:``port`` answered, else "PID error:ERRNO-NAME"."""
    try:
        return f"{os.getpid()} {fetch(port)}"
    except OSError as exc:
        return f"{os.getpid()} error:{errno.errorcode.get(exc.errno or 0, exc.errno)}"


def test_a_restricted_call_never_leaves_a_restricted_warm_worker(executors: Executors) -> None:
    ex = executors([limited("fetch", try_fetch), limited("fetch_offline", try_fetch, Limits(network=False))],
                   workers=1)
    server = PongServer()
    try:
        warm = set(ex.backend.worker_pids)  # type: ignore[attr-defined]
        (offline,) = executors.run(ex, [call(1, "fetch_offline", port=server.port)])
        (online,) = executors.run(ex, [call(2, "fetch", port=server.port)])
        offline2, online2 = executors.run(ex, [call(3, "fetch_offline", port=server.port),
                                               call(4, "fetch", port=server.port)])
    finally:
        server.close()
    off_pid, off_said = text(offline).split()
    off2_pid, off2_said = text(offline2).split()
    on_pid, on_said = text(online).split()
    on2_pid, on2_said = text(online2).split()
    assert off_said.startswith("error:") and off2_said.startswith("error:"), (off_said, off2_said)
    assert on_said == "pong" and on2_said == "pong"
    # The restricted calls ran in one-shot processes of their own (each PID 1 of its own PID namespace:
    # the host knows them by their pids outside it); the warm worker (the same one throughout: nothing
    # replaced it) never entered their namespace.
    assert {int(on_pid), int(on2_pid)} <= warm
    assert off_pid == off2_pid == "1"
    one_shots = [offline.worker_pid, offline2.worker_pid]
    assert None not in one_shots and not set(one_shots) & warm and one_shots[0] != one_shots[1]
    executors.pids[id(ex)].update(p for p in one_shots if p is not None)
    assert not all_gone([p for p in one_shots if p is not None], 10.0)  # each gone after its call


def _stdlib_paths() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
    return sorted(p for p in paths if os.path.isdir(p))


def test_read_paths_let_a_call_read_inside_and_refuse_outside(executors: Executors, tmp_path: Path) -> None:
    inside, outside = tmp_path / "dir_a", tmp_path / "dir_b"
    inside.mkdir()
    outside.mkdir()
    (inside / "in.txt").write_text("inside")
    (outside / "out.txt").write_text("outside")
    reader = limited("reader", read_text, Limits(read_paths=[str(inside), *_stdlib_paths()]))
    ex = executors([reader, limited("plain_reader", read_text)], workers=2)
    ok, refused, plain = executors.run(ex, [call(1, "reader", path=str(inside / "in.txt")),
                                            call(2, "reader", path=str(outside / "out.txt")),
                                            call(3, "plain_reader", path=str(outside / "out.txt"))])
    assert text(ok) == "inside"
    assert refused.status == "error" and refused.error is not None
    assert refused.error.type == "PermissionError" and "Permission denied" in refused.error.message, refused.error
    assert text(plain) == "outside"  # the restriction bound that call's process only


def test_write_paths_let_a_call_write_inside_and_refuse_outside(executors: Executors, tmp_path: Path) -> None:
    inside, outside = tmp_path / "w_in", tmp_path / "w_out"
    inside.mkdir()
    outside.mkdir()
    writer = limited("writer", write_text, Limits(write_paths=[str(inside)]))
    ex = executors([writer, limited("plain_writer", write_text)], workers=2)
    ok, refused, plain = executors.run(ex, [call(1, "writer", path=str(inside / "x.txt"), value="in"),
                                            call(2, "writer", path=str(outside / "x.txt"), value="out"),
                                            call(3, "plain_writer", path=str(outside / "y.txt"), value="free")])
    assert text(ok) == "written" and (inside / "x.txt").read_text() == "in"
    assert refused.status == "error" and refused.error is not None
    # outside write_paths every mount is read-only (EROFS), and Landlock would refuse it too (EACCES)
    assert "Read-only file system" in refused.error.message, refused.error
    assert not (outside / "x.txt").exists()
    assert text(plain) == "written" and (outside / "y.txt").read_text() == "free"


def test_rlimits_hold_in_a_call_restricted_to_read_paths(executors: Executors, tmp_path: Path) -> None:
    """A read_paths call runs under Landlock in its one-shot process; its rlimits must still be applied
    there (and the call run), though Landlock hides /proc from that process."""
    inside = tmp_path / "dir_a"
    inside.mkdir()
    (inside / "in.txt").write_text("inside")
    paths = [str(inside), *_stdlib_paths()]
    tools = [limited("reader_mem", read_text, Limits(read_paths=paths, memory_mb=256)),
             limited("hog_mem", hog, Limits(read_paths=paths, memory_mb=256))]
    ex = executors(tools, workers=2)
    read, small, big = executors.run(ex, [call(1, "reader_mem", path=str(inside / "in.txt")),
                                          call(2, "hog_mem", mb=16), call(3, "hog_mem", mb=2048)])
    assert read.status == "ok", (read.status, read.error)
    assert text(read) == "inside"
    assert text(small) == "16"
    assert is_limit(big, "memory limit of 256 MB exceeded"), big.error


def test_open_files_gives_its_whole_budget_in_a_call_restricted_to_read_paths(
        executors: Executors, tmp_path: Path) -> None:
    """open_files=16 means at least 16 descriptors for the call (docs/executor.md), Landlock or not."""
    paths = [str(tmp_path), os.devnull, *_stdlib_paths()]
    tools = [limited("opener", open_many, Limits(open_files=16)),
             limited("opener_landlocked", open_many, Limits(open_files=16, read_paths=paths))]
    ex = executors(tools, workers=1)
    plain, landlocked = executors.run(ex, [call(1, "opener", n=16), call(2, "opener_landlocked", n=16)])
    assert text(plain) == "16"
    assert landlocked.status == "ok", landlocked.error
    assert text(landlocked) == "16"


# ---------------------------------------------------------------- what cannot be enforced is refused

def test_a_process_limit_is_refused_as_root_or_enforced_otherwise(executors: Executors) -> None:
    forker = limited("forker", fork_children, Limits(processes=2))
    if not rlimit_probe("processes").ok:  # root (CAP_SYS_RESOURCE): RLIMIT_NPROC does not bind
        before = children()
        with pytest.raises(LimitsNotEnforceable, match=r"tool 'forker': processes=2 cannot be enforced") as caught:
            executors([forker])
        assert "processes" in str(caught.value) and [m.field for m in caught.value.missing] == ["processes"]
        assert children() <= before  # refused before any process started
        return
    ex = executors([forker], workers=1)
    few, many = executors.run(ex, [call(1, "forker", n=1), call(2, "forker", n=20)])
    assert text(few) == "1"
    assert is_limit(many, "process limit of 2 exceeded"), many.error


def test_best_effort_starts_without_what_it_cannot_enforce_and_logs_it(
        executors: Executors, caplog: pytest.LogCaptureFixture) -> None:
    forker = limited("forker", fork_children, Limits(processes=2, memory_mb=256, enforce="best-effort"))
    with caplog.at_level(logging.WARNING, logger="toolfork.governance"):
        ex = executors([forker], workers=1)
    (r,) = executors.run(ex, [call(1, "forker", n=1)])
    assert text(r) == "1"
    if not rlimit_probe("processes").ok:
        warned = [rec for rec in caplog.records if rec.name == "toolfork.governance"
                  and rec.levelno == logging.WARNING]
        assert any("processes=2" in rec.getMessage() and "forker" in rec.getMessage() for rec in warned), \
            caplog.text
        assert not any("memory_mb" in rec.getMessage() for rec in warned)  # that one is enforced


def test_sequential_mode_refuses_limits_and_runs_them_best_effort(
        executors: Executors, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(LimitsNotEnforceable, match="sequential mode") as caught:
        executors([limited("hog", hog, Limits(memory_mb=256))], mode="sequential")
    assert "memory_mb=256" in str(caught.value) and "tool 'hog'" in str(caught.value)
    # The Executor's default limits are refused the same way.
    with pytest.raises(LimitsNotEnforceable, match="sequential mode"):
        executors([limited("echo", echo)], mode="sequential", limits=Limits(cpu_s=1))
    with caplog.at_level(logging.WARNING, logger="toolfork.governance"):
        ex = executors([limited("hog", hog, Limits(memory_mb=256, enforce="best-effort"))], mode="sequential")
    assert ex.mode == "sequential"
    (r,) = executors.run(ex, [call(1, "hog", mb=16)])
    assert text(r) == "16"
    assert "not applied (enforce='best-effort')" in caplog.text and "memory_mb=256" in caplog.text


def test_an_inline_tool_with_limits_is_refused(executors: Executors) -> None:
    before = children()
    with pytest.raises(LimitsNotEnforceable, match=r"tool 'here'.*inline"):
        executors([limited("here", echo, Limits(cpu_s=1), inline=True), limited("echo", echo)])
    with pytest.raises(LimitsNotEnforceable, match=r"tool 'here'.*inline"):
        executors([limited("here", echo, inline=True)], limits=Limits(memory_mb=64))
    assert children() <= before


# ---------------------------------------------------------------- bad settings, refused where written

def test_bad_settings_are_refused_where_written_naming_the_setting(executors: Executors) -> None:
    before = children()
    with pytest.raises(LimitsError, match=r"memory_mb=-1"):
        Limits(memory_mb=-1)
    with pytest.raises(ToolDefinitionError, match=r"rate_limit.*'fast'"):
        tool(rate_limit="fast")(echo)
    with pytest.raises(ToolDefinitionError, match=r"max_concurrency"):
        tool(max_concurrency=0)(echo)
    with pytest.raises(ValueError, match=r"'db'"):
        executors([limited("echo", echo)], concurrency={"db": 0})
    grouped = limited("grouped", echo, concurrency_group="nosuch")
    with pytest.raises(ValueError, match=r"concurrency_group='nosuch'"):
        executors([grouped], concurrency={"db": 3})
    with pytest.raises(ValueError, match=r"nosuch"):
        executors([grouped])
    assert children() <= before  # nothing was started for a refused Executor


def test_an_errno_that_is_not_a_limit_stays_the_tools_own_error(executors: Executors) -> None:
    """Only errors that stand for a limit the tool has become LimitExceeded (a refused connection under
    memory_mb is the tool's own OSError)."""
    ex = executors([limited("fetch_mem", fetch, Limits(memory_mb=256, open_files=64))], workers=1)
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there now
    (r,) = executors.run(ex, [call(1, "fetch_mem", port=port)])
    assert r.status == "error" and r.error is not None
    assert r.error.type == "ConnectionRefusedError", r.error
    assert str(errno.ECONNREFUSED) in r.error.message or "refused" in r.error.message.lower()
