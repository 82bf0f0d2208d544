"""Running a test's body in a real forked child: its return value, or how it died, and its CPU time.

Governance mechanisms change the process they run in for good (a namespace, a Landlock domain) or
for a call (rlimits), so each test runs them in a child of its own. The child sends back a picklable
value (or the repr of what it raised) over a pipe and exits with os._exit; the parent reaps it with
wait4 (for its CPU time), and kills it if it outlives `timeout`, so nothing is left behind.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NOBODY = 65534


@dataclass
class Outcome:
    value: Any  # what the body returned (None if it died or raised)
    raised: str | None  # "Type: message" if the body raised
    status: int  # the wait status
    cpu_s: float  # user + system CPU time of the child

    @property
    def signal(self) -> int | None:
        return os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else None


def in_child(body: Callable[[], Any], timeout: float = 90.0) -> Outcome:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            try:
                payload = pickle.dumps(("ok", body()))
            except BaseException as exc:
                payload = pickle.dumps(("raised", f"{type(exc).__name__}: {exc}"))
            view = memoryview(payload)
            while view:
                view = view[os.write(write_fd, view):]
        finally:
            os._exit(0)
    os.close(write_fd)
    data = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([read_fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    break
                data += chunk
    finally:
        os.close(read_fd)
        _, status, usage = os.wait4(pid, 0)
    kind, value = pickle.loads(bytes(data)) if data else (None, None)
    return Outcome(value if kind == "ok" else None, value if kind == "raised" else None, status,
                   usage.ru_utime + usage.ru_stime)


def become_nobody(uid: int = NOBODY) -> None:
    """In a child: drop root for an unprivileged user, staying dumpable as such a process would be.
    ``uid``: a user of its own, for a test that counts the user's processes (RLIMIT_NPROC counts every
    process of the user, and other tests run as nobody at the same time)."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(uid)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: setuid cleared it; own /proc/self again
