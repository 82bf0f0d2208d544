"""A warm worker keeps a call's rlimits in place for the next call under the same limits and puts its own
back before a call under other limits or none. What must still hold, tried as a tool would break it:
no unlimited call and no call of another tool ever runs under a kept limit; a tool that leaks
descriptors still gets its whole open-files budget in each call; a tool that lifts its own limit gets
it back in its next call; and a run of calls under the same limits sets them once. Real forked workers,
real rlimits."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from tests.governance.executors import MIB, Executors, call, text
from tests.governance.forked import in_child
from toolfork import Limits, Tool

NAMES = ("RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE")


def soft_limits() -> str:
    """The worker's soft rlimits, as text."""
    return " ".join(f"{n}={resource.getrlimit(getattr(resource, n))[0]}" for n in NAMES)


def file_size_limit() -> str:
    """The soft RLIMIT_FSIZE in force."""
    return str(resource.getrlimit(resource.RLIMIT_FSIZE)[0])


_LEAKED: list[int] = []


def leak_descriptors(n: int) -> str:
    """Open ``n`` descriptors and never close them (a leak the worker keeps between calls)."""
    for _ in range(n):
        _LEAKED.append(os.open(os.devnull, os.O_RDONLY))
    return str(len(_LEAKED))


def lift_and_write(path: str, mb: int, lift: bool) -> str:
    """Lift the file size limit to the hard limit first when ``lift``, then write ``mb`` MiB."""
    if lift:
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.getrlimit(resource.RLIMIT_FSIZE)[1],) * 2)
    with open(path, "wb") as f:
        f.write(b"x" * (mb * MIB))
    return str(mb)


def test_an_unlimited_call_or_another_tools_call_never_runs_under_kept_limits(executors: Executors) -> None:
    small, other = Limits(file_size_mb=1, open_files=16, memory_mb=256, cpu_s=30), Limits(file_size_mb=3)
    tools = [Tool("limited", fn=soft_limits, limits=small), Tool("other", fn=file_size_limit, limits=other),
             Tool("plain", fn=soft_limits), Tool("plain_size", fn=file_size_limit)]
    ex = executors(tools, workers=1)
    (before,) = executors.run(ex, [call(0, "plain")])
    order = ["limited", "limited", "limited", "plain", "limited", "other", "limited", "plain_size", "other",
             "other", "plain", "limited", "limited", "plain"]
    results = executors.run(ex, [call(i, name) for i, name in enumerate(order, 1)])
    assert len({r.worker_pid for r in [before, *results]}) == 1  # one warm worker served every call
    for name, r in zip(order, results, strict=True):
        if name == "plain":
            assert text(r) == text(before), (name, r.call_id)
        elif name == "plain_size":
            assert text(r) == str(resource.RLIM_INFINITY) == text(before).split("RLIMIT_FSIZE=")[1].split()[0]
        elif name == "other":
            assert text(r) == str(3 * MIB), r.call_id
        else:
            assert f"RLIMIT_FSIZE={MIB} " in text(r), (r.call_id, text(r))
    # a run of calls under the same limits gives each the same limits (nothing drifts while kept)
    kept = {text(r) for name, r in zip(order, results, strict=True) if name == "limited"}
    assert all("RLIMIT_NOFILE=" in k for k in kept)


def test_a_tool_that_leaks_descriptors_gets_its_whole_budget_in_each_call(executors: Executors) -> None:
    ex = executors([Tool("leak", fn=leak_descriptors, limits=Limits(open_files=8))], workers=1)
    results = executors.run(ex, [call(i, "leak", n=6) for i in range(4)])
    # each call opens 6 under a budget of 8 on top of what the worker holds then: 24 leaked in the end
    assert [text(r) for r in results] == ["6", "12", "18", "24"]
    assert len({r.worker_pid for r in results}) == 1


def test_a_tool_that_lifts_its_limit_is_under_it_again_in_its_next_call(executors: Executors,
                                                                         tmp_path: Path) -> None:
    tools = [Tool("writer", fn=lift_and_write, limits=Limits(file_size_mb=1)),
             Tool("plain_size", fn=file_size_limit)]
    ex = executors(tools, workers=1)
    results = executors.run(ex, [
        call(1, "writer", path=str(tmp_path / "a"), mb=2, lift=False),
        call(2, "writer", path=str(tmp_path / "b"), mb=2, lift=True),  # lifts it itself: guard rails allow that
        call(3, "writer", path=str(tmp_path / "c"), mb=2, lift=False),
        call(4, "plain_size"),
    ])
    assert results[0].error is not None and results[0].error.type == "LimitExceeded", results[0]
    assert text(results[1]) == "2"
    assert results[2].error is not None and results[2].error.type == "LimitExceeded", results[2]
    assert "file size limit of 1 MB exceeded" in results[2].error.message
    assert text(results[3]) == str(resource.RLIM_INFINITY)
    assert len({r.worker_pid for r in results}) == 1


def spin_or_drop_handler(seconds: float, drop: bool) -> str:
    """Drop the CPU timer's handler (SIGPROF ignored) when ``drop``; then spin ``seconds`` of CPU time."""
    import signal
    import time

    if drop:
        signal.signal(signal.SIGPROF, signal.SIG_IGN)
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return str(os.getpid())


def test_a_tool_that_drops_the_cpu_timers_handler_is_stopped_by_it_in_its_next_call(executors: Executors) -> None:
    ex = executors([Tool("spin", fn=spin_or_drop_handler, limits=Limits(cpu_s=1))], workers=1)
    results = executors.run(ex, [call(1, "spin", seconds=0.01, drop=True), call(2, "spin", seconds=30, drop=False),
                                 call(3, "spin", seconds=0.01, drop=False)])
    assert text(results[0]) == str(results[0].worker_pid)
    assert results[1].error is not None and results[1].error.type == "LimitExceeded", results[1]
    assert "CPU time limit of 1 s exceeded" in results[1].error.message
    # stopped by the timer's handler, in the interpreter: the worker lives on (SIGXCPU would have ended it)
    assert text(results[2]) == str(results[0].worker_pid) == str(results[1].worker_pid)


def test_a_run_of_calls_under_the_same_limits_sets_them_once_and_release_puts_them_back() -> None:
    def body() -> dict[str, object]:
        from toolfork.governance import rlimits

        limits = Limits(memory_mb=256, cpu_s=30, file_size_mb=8, open_files=64)
        original = rlimits._setrlimit
        sets: list[int] = []

        def counted(which: int, value: tuple[int, int]) -> None:
            sets.append(which)
            original(which, value)

        rlimits._setrlimit = counted
        own = resource.getrlimit(resource.RLIMIT_FSIZE)
        for _ in range(50):
            with rlimits.applied(limits, keep=True):
                inside = resource.getrlimit(resource.RLIMIT_FSIZE)
        kept = resource.getrlimit(resource.RLIMIT_FSIZE)
        first_run = len(sets)
        rlimits.release()
        return {"own": own, "inside": inside, "kept": kept, "released": resource.getrlimit(resource.RLIMIT_FSIZE),
                "first_run": first_run, "after_release": len(sets)}

    out = in_child(body)
    assert out.raised is None, out.raised
    v = out.value
    assert v["inside"][0] == 8 * MIB and v["kept"] == v["inside"]
    assert v["released"] == v["own"]
    # four limits set on the first call; later calls set only what moved (the memory figure may move a
    # few times, the CPU second once or twice): far fewer than the 4 a call (plus 4 restores) of before
    assert 4 <= v["first_run"] <= 4 + 10, v
    assert v["after_release"] > v["first_run"]
