"""Looking at processes from tests: alive (a zombie counts as gone), and waiting until gone."""

from __future__ import annotations

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
