"""A watchdog for the local Ray instance toolfork starts: it ends Ray's processes if the host dies.

Ray's own processes notice a dead driver, but not all of them (on Ray 2.60 the dashboard and
runtime-env agents of a SIGKILLed driver lived on). The watchdog is a separate, exec'd Python process
(never a bare fork of a host full of Ray's threads) holding the read end of a pipe whose write end
only the host holds. When the pipe reaches EOF — the host closed its executors, or died in any way —
it waits a moment for a normal shutdown to finish, then kills every process of this Ray instance, and
exits. A process is this instance's if it carries the instance's marker in its environment (set only
while ``ray.init`` starts Ray's processes, which pass it on), or names the instance's session directory
on its command line, or holds a file of that directory open: the agents rename themselves with
setproctitle, which hides both their command line and their environment, but they keep their logs
open there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from toolfork.executor.backends.host_fds import host_only, release

MARKER = "TOOLFORK_RAY_INSTANCE"
GRACE_S = 1.0

_SCRIPT = """
import os, sys, time
import psutil
fd, marker, grace, host = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
received = b""
try:
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        received += chunk
except OSError:
    pass
session = received.decode(errors="replace").strip()
time.sleep(grace)

def ours(p):
    if p.environ().get("TOOLFORK_RAY_INSTANCE") == marker:
        return True
    if not session:
        return False
    if session in " ".join(p.cmdline()):
        return True
    return any(f.path.startswith(session) for f in p.open_files())

for p in psutil.process_iter():
    if p.pid in (os.getpid(), host):  # the host may still be alive (a normal close) and holds logs open
        continue
    try:
        if ours(p):
            p.kill()
    except psutil.Error:
        pass
"""


class Watchdog:
    """The host's end of the watchdog: closing it (or dying) lets the watchdog clean up and exit."""

    def __init__(self) -> None:
        self.marker = uuid.uuid4().hex
        read_end, self._write_end = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != MARKER}
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SCRIPT, str(read_end), self.marker, str(GRACE_S), str(os.getpid())],
            pass_fds=(read_end,), env=env, start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(read_end)
        host_only(self._write_end)  # a fork pool's template must not hold it: the watchdog waits for its EOF

    @contextmanager
    def marking(self) -> Iterator[None]:
        """Processes started inside this block (Ray's) inherit the marker; the host's later ones don't."""
        os.environ[MARKER] = self.marker
        try:
            yield
        finally:
            os.environ.pop(MARKER, None)

    def tell_session(self, session_dir: str) -> None:
        """Once Ray runs: the directory whose open files mark the processes that hide the marker."""
        if self._write_end >= 0 and session_dir:
            os.write(self._write_end, session_dir.encode() + b"\n")

    def close(self) -> None:
        """After ``ray.shutdown``: the watchdog sweeps what is left, then exits; we reap it."""
        if self._write_end >= 0:
            release(self._write_end)
            os.close(self._write_end)
            self._write_end = -1
            try:
                self._proc.wait(GRACE_S + 10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


__all__ = ["MARKER", "Watchdog"]
