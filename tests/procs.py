"""Looking at processes from tests: alive (a zombie counts as gone), waiting until gone, what runs
below this process, and running a body in a forked child."""

from __future__ import annotations

import ast
import os
import time
from collections.abc import Callable
from typing import Any

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


def in_forked_child(body: Callable[[], Any]) -> Any:
    """What ``body()`` returns, run in a forked child (for what a process does for good: rlimits made
    hard, a seccomp filter): a plain value (its repr read back), or the text "raised ..." naming what it
    raised. The child is reaped before this returns."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.write(w, repr(body()).encode())
        except BaseException as exc:  # reported, not hidden
            os.write(w, repr(f"raised {type(exc).__name__}: {exc}").encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert data, "the child died before it answered"
    return ast.literal_eval(data.decode())
