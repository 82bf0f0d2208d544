"""rlimits for one call, in real forked children: the limit bites, the call learns which limit it
hit, and the worker's own limits are back after the call."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import resource
import signal
import threading
import time
from pathlib import Path

import pytest

from toolfork.governance import LimitExceededError, Limits, applied, classify

from .forked import become_nobody, in_child

GIB = 1024**3
MIB = 1024**2
ALL = (resource.RLIMIT_DATA, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE,
       resource.RLIMIT_NPROC)


def _rlimits() -> list[tuple[int, int]]:
    return [resource.getrlimit(r) for r in ALL]


def test_a_2_gb_allocation_under_256_mb_gets_memory_error_and_the_limit_is_lifted_after() -> None:
    limits = Limits(memory_mb=256)

    def body() -> dict:
        before = _rlimits()
        with applied(limits) as state:
            try:
                bytes(2 * GIB)
                outcome = None
            except MemoryError as exc:
                outcome = exc
            small = len(bytes(64 * MIB))  # well inside the budget
        verdict = state.classify(outcome)
        after_call = len(bytes(512 * MIB))  # twice the budget: allowed again
        return {"verdict": verdict and verdict.message, "small": small, "after": after_call,
                "restored": _rlimits() == before}

    out = in_child(body)
    assert out.raised is None, out.raised
    assert out.value == {"verdict": "memory limit of 256 MB exceeded", "small": 64 * MIB, "after": 512 * MIB,
                         "restored": True}


def test_a_busy_loop_under_cpu_s_1_ends_at_about_1_s_of_cpu() -> None:
    limits = Limits(cpu_s=1)

    def body() -> dict:
        before = _rlimits()
        handler = signal.getsignal(signal.SIGXCPU)
        start = time.process_time()
        outcome: BaseException | None = None
        with applied(limits) as state:
            try:
                while True:
                    pass
            except LimitExceededError as exc:
                outcome = exc
        used = time.process_time() - start
        verdict = state.classify(outcome)
        return {"verdict": verdict and verdict.message, "used": used, "restored": _rlimits() == before,
                "handler_back": signal.getsignal(signal.SIGXCPU) == handler}

    out = in_child(body)
    assert out.raised is None, out.raised
    assert out.value["verdict"] == "CPU time limit of 1 s exceeded"
    assert 0.5 <= out.value["used"] <= 5.0, out.value
    assert out.value["restored"] and out.value["handler_back"]


def test_the_cpu_budget_counts_from_the_workers_cpu_time_so_far() -> None:
    def body() -> float:
        spent = time.process_time() + 2.5
        while time.process_time() < spent:  # a worker that already used 2.5 s of CPU
            pass
        start = time.process_time()
        with applied(Limits(cpu_s=1)):
            try:
                while True:
                    pass
            except LimitExceededError:
                pass
        return time.process_time() - start

    out = in_child(body)
    assert out.raised is None, out.raised
    assert 0.5 <= out.value <= 5.0  # not cut at once for what the worker spent before


def test_a_call_that_swallows_the_cpu_error_dies_of_sigxcpu_and_is_named() -> None:
    limits = Limits(cpu_s=1)

    def body() -> None:
        with applied(limits):
            while True:
                try:
                    while True:
                        pass
                except LimitExceededError:
                    continue  # ignore it and keep burning

    out = in_child(body)
    assert out.signal == signal.SIGXCPU, out
    verdict = classify(out.status, limits)
    assert verdict is not None and verdict.message == "CPU time limit of 1 s exceeded"
    assert out.cpu_s <= 8.0


def _pbkdf2_rounds_for(cpu_s: float) -> int:
    """How many PBKDF2 rounds take about `cpu_s` of CPU here (OpenSSL's loop, never back in Python)."""
    start = time.process_time()
    hashlib.pbkdf2_hmac("sha256", b"k", b"salt", 200_000)
    return int(200_000 * cpu_s / max(time.process_time() - start, 1e-3))


@pytest.mark.parametrize("privileged", [True, False], ids=["this-user", "nobody"])
def test_code_that_never_returns_to_the_interpreter_is_ended_by_the_kernel_at_the_limit(privileged: bool) -> None:
    """As the user running the tests (root, with or without CAP_SYS_RESOURCE) and as nobody."""
    limits = Limits(cpu_s=1)

    def body() -> float:
        rounds = _pbkdf2_rounds_for(10.0)  # room for a rough estimate
        if not privileged and os.geteuid() == 0:
            become_nobody()
        start = time.process_time()
        with applied(limits):
            try:
                hashlib.pbkdf2_hmac("sha256", b"k", b"salt", rounds)
            except LimitExceededError:
                return time.process_time() - start
        return -1.0

    out = in_child(body, timeout=90.0)
    assert out.signal == signal.SIGXCPU, out  # SIGXCPU keeps its default action for the call
    assert out.cpu_s <= 6.0, out
    verdict = classify(out.status, limits)
    assert verdict is not None and verdict.limit == "cpu_s"


def test_a_100_mb_write_under_file_size_mb_8_fails_with_efbig_and_the_worker_lives(tmp_path: Path) -> None:
    limits = Limits(file_size_mb=8)
    target = tmp_path / "big"

    def body() -> dict:
        before = _rlimits()
        caught = None
        with applied(limits) as state, open(target, "wb") as f:
            try:
                for _ in range(100):
                    f.write(b"x" * MIB)
                    f.flush()
            except OSError as exc:
                caught = exc
        verdict = state.classify(caught)
        swallowed = state.classify(None)  # even a tool that hid the error hit the limit
        (tmp_path / "after").write_bytes(b"y" * (9 * MIB))  # larger than the limit: allowed again
        return {"errno": getattr(caught, "errno", None), "verdict": verdict and verdict.message,
                "swallowed": swallowed and swallowed.message, "restored": _rlimits() == before}

    out = in_child(body)
    assert out.raised is None and out.status == 0, out
    assert out.value == {"errno": errno.EFBIG, "verdict": "file size limit of 8 MB exceeded",
                         "swallowed": "file size limit of 8 MB exceeded", "restored": True}
    assert target.stat().st_size <= 8 * MIB
    assert (tmp_path / "after").stat().st_size == 9 * MIB


def test_off_the_main_thread_a_write_past_the_limit_fails_or_kills_as_sigxfsz_is_set(tmp_path: Path) -> None:
    limits = Limits(file_size_mb=1)

    def body(default_action: bool) -> object:
        if default_action:  # as a host that restored SIGXFSZ's default action would have it
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        seen: list[object] = []

        def write() -> None:
            with applied(limits) as state, open(tmp_path / "f", "wb") as f:
                try:
                    f.write(b"x" * (4 * MIB))
                    f.flush()
                except OSError as exc:
                    verdict = state.classify(exc)
                    seen.append(verdict and verdict.message)
        t = threading.Thread(target=write)
        t.start()
        t.join()
        return seen

    ignored = in_child(lambda: body(False))  # Python ignores SIGXFSZ from startup: the write fails
    assert ignored.value == ["file size limit of 1 MB exceeded"], ignored
    killed = in_child(lambda: body(True))  # no handler can be installed off the main thread: it dies
    assert killed.signal == signal.SIGXFSZ, killed
    verdict = classify(killed.status, limits)
    assert verdict is not None and verdict.message == "file size limit of 1 MB exceeded"


def test_open_files_beyond_the_budget_get_emfile(tmp_path: Path) -> None:
    limits = Limits(open_files=16)

    def body() -> dict:
        before = _rlimits()
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
        gaps = max(fds) + 1 - len(fds)  # free numbers below the highest open descriptor (a pytest worker has some)
        opened: list[int] = []
        caught = None
        with applied(limits) as state:
            try:
                for i in range(16 + gaps + 100):
                    opened.append(os.open(tmp_path / f"f{i}", os.O_CREAT | os.O_WRONLY))
            except OSError as exc:
                caught = exc
        for fd in opened:
            os.close(fd)
        verdict = state.classify(caught)
        return {"opened": len(opened), "gaps": gaps, "verdict": verdict and verdict.message,
                "restored": _rlimits() == before}

    out = in_child(body)
    assert out.raised is None, out.raised
    # RLIMIT_NOFILE bounds descriptor numbers: the budget, plus the gaps the worker already had (documented).
    assert 16 <= out.value["opened"] <= 16 + out.value["gaps"] + 1, out.value
    assert out.value["verdict"] == "open files limit of 16 exceeded" and out.value["restored"]


def test_processes_beyond_the_budget_cannot_be_started_by_an_unprivileged_worker() -> None:
    limits = Limits(processes=3)

    def body() -> dict:
        become_nobody(61_000 + os.getpid() % 4_000)  # a user no other process runs as: the budget is exact
        from toolfork.governance.rlimits import probe
        read_fd, write_fd = os.pipe()
        kids: list[int] = []
        caught = None
        with applied(limits) as state:
            try:
                for _ in range(20):
                    pid = os.fork()
                    if pid == 0:
                        os.close(write_fd)
                        os.read(read_fd, 1)  # until the parent closes the pipe
                        os._exit(0)
                    kids.append(pid)
            except OSError as exc:
                caught = exc
        os.close(write_fd)
        for pid in kids:
            os.waitpid(pid, 0)
        verdict = state.classify(caught)
        return {"kids": len(kids), "verdict": verdict and verdict.message, "probe": probe("processes").ok}

    out = in_child(body)
    assert out.raised is None, out.raised
    assert 1 <= out.value["kids"] <= 3
    assert out.value["verdict"] == "process limit of 3 exceeded" and out.value["probe"] is True


def test_limits_are_restored_when_the_call_raises() -> None:
    def body() -> bool:
        before = _rlimits()
        handlers = [signal.getsignal(signal.SIGXCPU), signal.getsignal(signal.SIGXFSZ)]
        try:
            with applied(Limits(memory_mb=64, cpu_s=30, file_size_mb=1, open_files=8, processes=2)):
                raise ValueError("tool failed")
        except ValueError:
            pass
        return _rlimits() == before and handlers == [signal.getsignal(signal.SIGXCPU), signal.getsignal(signal.SIGXFSZ)]

    out = in_child(body)
    assert out.value is True, out


def test_classify_names_only_the_limits_that_were_set() -> None:
    mem = Limits(memory_mb=256)
    try:
        try:
            raise MemoryError
        except MemoryError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as exc:
        wrapped = exc
    found = classify(wrapped, mem)
    assert found is not None and (found.type, found.limit, found.value) == ("LimitExceeded", "memory_mb", 256)
    assert classify(MemoryError(), Limits(cpu_s=1)) is None  # no memory limit asked: not ours
    assert classify(OSError(errno.EFBIG, "too big"), mem) is None
    assert classify(ValueError("x"), mem) is None and classify(None, mem) is None
    assert classify(0, mem) is None
    # A worker that died mid-call of a signal C code sends itself when it cannot allocate (OpenBLAS raises
    # SIGINT when its threads cannot start) is the memory limit's, and only under memory_mb.
    for sig in (signal.SIGSEGV, signal.SIGABRT, signal.SIGINT):
        died = classify(int(sig), mem)  # a wait status: killed by `sig`
        assert died is not None and died.limit == "memory_mb" and "most likely" in died.message, (sig, died)
        assert classify(int(sig), Limits(cpu_s=5)) is None
    assert classify(int(signal.SIGTERM), mem) is None


def test_restrictions_alone_touch_no_rlimit_and_no_handler() -> None:
    def body() -> bool:
        before = _rlimits(), signal.getsignal(signal.SIGXCPU), signal.getsignal(signal.SIGXFSZ)
        with applied(Limits(network=False, read_paths=["/"])) as state:
            inside = _rlimits(), signal.getsignal(signal.SIGXCPU), signal.getsignal(signal.SIGXFSZ)
        return before == inside and state.classify(MemoryError()) is None

    assert in_child(body).value is True


def test_a_descriptor_that_takes_the_parents_statm_number_in_a_forked_child_is_left_alone() -> None:
    """The memory limit reads /proc/<pid>/statm through a descriptor kept per process. A forked child must
    not close the parent's by number later: a sandbox closes what it does not keep, and the number may
    name one of the call's channels by the time the child's first call is limited."""
    from toolfork.governance import rlimits

    def body() -> bool:
        with applied(Limits(memory_mb=256)):
            pass
        number = rlimits._STATM[0][1]  # this process's, open now
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                with contextlib.suppress(OSError):
                    os.close(number)
                r, w = os.pipe()
                os.dup2(r, 200)
                os.dup2(w, number)  # the pipe's write end takes the parent's number
                for fd in {r, w} - {number}:
                    os.close(fd)
                with applied(Limits(memory_mb=256)):
                    pass
                os.write(number, b"x")  # still the pipe
                code = 0 if os.read(200, 1) == b"x" else 1
            finally:
                os._exit(code)
        return os.waitpid(pid, 0)[1] == 0

    out = in_child(body)
    assert out.value is True, out
