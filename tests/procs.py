"""Looking at processes from tests: alive (a zombie counts as gone), waiting until gone, and what runs
below this process."""

from __future__ import annotations

import os
import time

import psutil


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # gone, possibly between two looks
        return False


def all_gone(pids: list[int], seconds: float) -> list[int]:
    """Wait up to ``seconds`` for every pid to be gone; returns those still alive."""
    end = time.monotonic() + seconds
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < end:
        time.sleep(0.02)
        left = [p for p in left if alive(p)]
    return left


def gone(pid: int, seconds: float = 10.0) -> bool:
    return not all_gone([pid], seconds)


def descendants() -> list[int]:
    """Every live process below this one (what toolfork forked: templates, workers, supervisors, session
    processes and their spares)."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] not in ("Z", "X"):
            parent[int(name)] = int(fields[1])
    me, found = os.getpid(), []
    for pid in parent:
        up = parent.get(pid)
        while up is not None and up > 1:
            if up == me:
                found.append(pid)
                break
            up = parent.get(up)
    return sorted(found)
