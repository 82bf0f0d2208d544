"""How busy the machine was while the benchmark ran, from outside the benchmark's own processes.

    MachineLoad.start() ── system CPU times, our CPU (self + reaped children), load average ──┐
    ... the run ...                                                                              │
    .finish() ── the same again ──▶ other processes' share of the CPU, steal, load ──▶ warnings ◀┘

"Other processes" is the machine's busy CPU time minus what this process and its children (the
runners, their pools: all reaped by the end of the run) used; on a quiet machine it is near 0.
Steal is time a virtual machine's host gave to someone else. Both, and a load average above the core
count, make every figure of the run less sure: the summary says so.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import psutil

# Warn above these: other processes' share of all cores, steal's share, load average per core.
OTHERS_LIMIT = 0.25
STEAL_LIMIT = 0.05
LOAD_PER_CORE_LIMIT = 1.0


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # not on this platform
        return None


@dataclass
class LoadReport:
    cores: int
    wall_s: float
    others_share: float  # of all cores, over the run
    steal_share: float
    load_start: float | None
    load_end: float | None

    def to_dict(self) -> dict[str, float | int | list[str] | None]:
        return {**asdict(self), "warnings": self.warnings()}

    def warnings(self) -> list[str]:
        out = []
        if self.others_share > OTHERS_LIMIT:
            out.append(f"other processes used {self.others_share:.0%} of the CPU during the run")
        if self.steal_share > STEAL_LIMIT:
            out.append(f"the hypervisor stole {self.steal_share:.0%} of the CPU")
        loads = [x for x in (self.load_start, self.load_end) if x is not None]
        if loads and max(loads) > LOAD_PER_CORE_LIMIT * self.cores:
            out.append(f"load average reached {max(loads):.1f} on {self.cores} cores")
        return out


@dataclass
class MachineLoad:
    t0: float
    cpu0: psutil._common.scputimes  # type: ignore[name-defined]
    own0: float
    load0: float | None

    @classmethod
    def start(cls) -> MachineLoad:
        return cls(time.monotonic(), psutil.cpu_times(), _own_cpu_s(), _loadavg())

    def finish(self) -> LoadReport:
        cpu1 = psutil.cpu_times()
        wall = max(1e-9, time.monotonic() - self.t0)
        cores = psutil.cpu_count() or 1

        def busy(t: psutil._common.scputimes) -> float:  # type: ignore[name-defined]
            idle = t.idle + getattr(t, "iowait", 0.0) + getattr(t, "steal", 0.0)
            return sum(t) - idle - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)

        total = max(1e-9, sum(cpu1) - sum(self.cpu0))
        others = max(0.0, busy(cpu1) - busy(self.cpu0) - (_own_cpu_s() - self.own0))
        steal = getattr(cpu1, "steal", 0.0) - getattr(self.cpu0, "steal", 0.0)
        return LoadReport(
            cores=cores,
            wall_s=round(wall, 2),
            others_share=round(min(1.0, others / (wall * cores)), 3),
            steal_share=round(max(0.0, steal / total), 3),
            load_start=self.load0,
            load_end=_loadavg(),
        )
