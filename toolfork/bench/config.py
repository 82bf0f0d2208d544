"""Sizes, repetitions and time limits of a benchmark run: the full run, ``--quick``, and a tiny
profile for the test suite. One dataclass so that a run's JSON records exactly what was measured."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

KB = 1000
MB = 1000 * 1000

WORKLOADS: tuple[str, ...] = (
    "io",
    "cpu",
    "small",
    "tiny",
    "mixed",
    "hang",
    "crash",
    "payload",
    "memory",
    "scaling",
    "soak",
    "callers",
    "singles",
    "fresh",
    "payloads",
    "user",
)
# Workloads run only when asked for (--only, or --calls for "user"): kept out of the default run.
OPT_IN_WORKLOADS: tuple[str, ...] = ("payloads", "user")
DEFAULT_WORKLOADS: tuple[str, ...] = tuple(w for w in WORKLOADS if w not in OPT_IN_WORKLOADS)
# What --quick runs unless --only says otherwise: the timing rows a reader looks at first.
QUICK_WORKLOADS: tuple[str, ...] = ("io", "cpu", "small", "tiny", "singles")


@dataclass
class BenchConfig:
    profile: str = "full"
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    # Interleaved rounds: each round runs every workload once on every executor, in an order that
    # rotates; a cell's figure is the median over the rounds, shown with its min and max.
    rounds: int = 3
    # A cell whose (max - min) over the rounds exceeds this share of its median is flagged "wide".
    wide_spread: float = 0.3
    user_workers: int = field(default_factory=lambda: os.cpu_count() or 1)  # pool of the "user" workload
    reps: int = 5  # repetitions of the batch workloads (io, cpu, mixed)
    io_calls: int = 16
    io_sleep_s: float = 0.1
    io_workers: int = 16
    cpu_calls: int = 8
    cpu_call_s: float = 0.25  # target duration of one cpu call; iterations are calibrated
    cpu_iterations: int = 0  # 0: calibrate at the start of the run
    small_calls: int = 4
    small_reps: int = 500
    tiny_calls: int = 1000
    tiny_reps: int = 5
    mixed_slow_s: float = 1.0
    mixed_reps: int = 3
    mixed_quick_calls: int = 7
    mixed_workers: int = 2
    hang_timeout_s: float = 0.5
    hang_calls: int = 4
    crash_calls: int = 4
    crash_call_timeout_s: float = 2.0  # bounds peers that lose the crashed call's result
    crash_sleep_s: float = 0.1  # how long the other calls of the crash batch run (the crash comes at 0.01 s)
    payload_sizes: tuple[int, ...] = (1 * KB, 1 * MB, 100 * MB)
    payload_reps: tuple[int, ...] = (20, 5, 1)
    memory_host_mb: int = 200
    memory_workers: int = 8
    scaling_workers: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    scaling_io_calls: int = 32
    scaling_io_sleep_s: float = 0.05
    scaling_cpu_calls: int = 32
    scaling_cpu_call_s: float = 0.05
    scaling_reps: int = 2
    soak_calls: int = 100_000
    soak_chunk: int = 1000
    # Executors that cannot finish the soak in this many seconds stop early (fork-per-call and Ray need
    # minutes for 100,000 calls here); the figures then cover the calls done, and the row says how many.
    soak_budget_s: float = 30.0
    # Concurrent callers: that many threads, released together by a barrier, each run a
    # batch of one call that sleeps callers_sleep_s, on one pool of callers_workers (enough for all).
    callers_counts: tuple[int, ...] = (4, 16)
    callers_workers: int = 16
    callers_sleep_s: float = 0.1
    callers_reps: int = 5
    # Single calls: singles_calls trivial calls submitted one by one (all at once, then waited for)
    # on a pool of `cores` workers, against one batch of as many calls on the same pool.
    singles_calls: int = 64
    singles_reps: int = 20
    # fresh_process: a trivial call on a warm worker against the same call in a process of
    # its own, one call per batch and batches of fresh_batch_calls, on a pool of fresh_workers; the
    # warm and fresh repetitions alternate so that both see the same load.
    fresh_workers: int = 2
    fresh_batch_calls: int = 8
    fresh_reps: int = 100
    # Large results (opt-in "payloads" workload): str, file block and rows at these sizes.
    payloads_sizes: tuple[int, ...] = (1 * MB, 10 * MB, 100 * MB)
    payloads_reps: tuple[int, ...] = (9, 5, 3)
    # Harness time limits (s): a cell that takes longer is recorded as "hung". They include pool
    # start-up and warm-up; peers with slow start-up (Ray) multiply them by their limit_factor.
    setup_limit_s: float = 90.0
    limits_s: dict[str, float] = field(
        default_factory=lambda: {
            "io": 60,
            "cpu": 90,
            "small": 60,
            "tiny": 90,
            "mixed": 60,
            "hang": 45,
            "crash": 60,
            "payload": 120,
            "memory": 90,
            "scaling": 300,
            "soak": 420,
            "callers": 90,
            "singles": 90,
            "fresh": 90,
            "payloads": 300,
            "user": 300,
        }
    )

    @classmethod
    def full(cls) -> BenchConfig:
        return cls()

    @classmethod
    def quick(cls) -> BenchConfig:
        """Under a minute on 2 cores: the headline workloads (QUICK_WORKLOADS) at small sizes, one
        repetition per round (the rounds give the spread), without the slow-starting executors."""
        return cls(
            profile="quick",
            reps=1,
            io_calls=8,
            io_sleep_s=0.05,
            io_workers=4,  # two waves: half the worker start-ups of spawn-style pools (loky)
            cpu_calls=4,
            cpu_call_s=0.02,
            mixed_reps=1,
            small_reps=10,
            tiny_calls=200,
            tiny_reps=1,
            singles_calls=32,
            crash_call_timeout_s=1.0,
            payload_sizes=(1 * KB, 1 * MB),
            payload_reps=(5, 3),
            scaling_workers=(1, 2, 4, 8),
            scaling_io_calls=8,
            scaling_io_sleep_s=0.02,
            scaling_cpu_calls=8,
            scaling_cpu_call_s=0.01,
            scaling_reps=1,
            soak_calls=5000,
            soak_budget_s=5.0,
            callers_reps=2,
            singles_reps=1,
            fresh_reps=20,
            limits_s={
                "io": 30,
                "cpu": 30,
                "small": 20,
                "tiny": 30,
                "mixed": 20,
                "hang": 20,
                "crash": 20,
                "payload": 30,
                "memory": 30,
                "scaling": 60,
                "soak": 60,
                "callers": 30,
                "singles": 30,
                "fresh": 30,
                "payloads": 120,
                "user": 120,
            },
            payloads_sizes=(1 * MB, 10 * MB),
            payloads_reps=(5, 3),
        )

    @classmethod
    def tiny(cls) -> BenchConfig:
        """Just enough to exercise every code path (the test suite's profile); figures mean nothing."""
        return cls(
            profile="tiny",
            rounds=1,
            reps=1,
            io_calls=4,
            io_sleep_s=0.01,
            io_workers=4,
            cpu_calls=2,
            cpu_call_s=0.005,
            small_reps=3,
            tiny_calls=20,
            tiny_reps=1,
            mixed_slow_s=0.05,
            mixed_reps=1,
            mixed_quick_calls=3,
            hang_timeout_s=0.3,
            crash_call_timeout_s=5.0,  # the tests' run: seconds of margin for a loaded machine
            crash_sleep_s=0.5,  # still running when the crash comes, on a loaded machine too
            payload_sizes=(1 * KB, 100 * KB),
            payload_reps=(1, 1),
            memory_host_mb=4,
            memory_workers=2,
            scaling_workers=(1, 2),
            scaling_io_calls=2,
            scaling_io_sleep_s=0.01,
            scaling_cpu_calls=2,
            scaling_cpu_call_s=0.002,
            scaling_reps=1,
            soak_calls=60,
            soak_chunk=20,
            callers_counts=(2, 4),
            callers_workers=4,
            callers_reps=1,
            singles_calls=8,
            singles_reps=2,
            fresh_reps=3,
            payloads_sizes=(300 * KB,),
            payloads_reps=(1,),
            limits_s={w: 30.0 for w in WORKLOADS},
        )

    @classmethod
    def for_profile(cls, name: str) -> BenchConfig:
        presets = {"full": cls.full, "quick": cls.quick, "tiny": cls.tiny}
        if name not in presets:
            raise ValueError(f"unknown benchmark profile {name!r}; choose one of {sorted(presets)}")
        return presets[name]()

    def limit_for(self, workload: str) -> float:
        return float(self.limits_s.get(workload, 60.0))

    def with_limits(self, seconds: float) -> BenchConfig:
        """Every cell's time limit set to ``seconds`` (tests use it to catch hangs fast)."""
        return replace(self, limits_s={w: seconds for w in WORKLOADS})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for name in ("payload_sizes", "payload_reps", "scaling_workers", "callers_counts"):
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)


def size_label(n: int) -> str:
    """A payload size as the benchmark's rows and metric names spell it (1MB, 64KB, 10B)."""
    if n >= MB:
        return f"{n // MB}MB"
    if n >= KB:
        return f"{n // KB}KB"
    return f"{n}B"
