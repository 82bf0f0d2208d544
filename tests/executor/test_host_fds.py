"""A descriptor the host registers with ``backends.host_fds.host_only`` is closed in every process the
fork backend forks from then on: the template (the one the pool starts with, and a replacement forked
after the first one died) and its workers. Real processes, read through /proc/PID/fd."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Any

import pytest

from tests.executor.tools_for_tests import ALL
from toolfork.executor import Executor, ToolCall
from toolfork.executor.backends.host_fds import HOST_FDS, host_only, release

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/fd (Linux)")
BOUND_S = 60.0  # a bound on each wait, not a timing


def _holds(pid: int, inode: int) -> bool:
    """Whether process ``pid`` has a descriptor on the socket ``inode``."""
    target = f"socket:[{inode}]"
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def test_a_registered_socket_is_closed_in_every_forked_process_the_replacement_template_included() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    inode = os.fstat(listener.fileno()).st_ino
    host_only(listener.fileno())
    try:
        with Executor(ALL, mode="fork", workers=2) as ex:
            backend = ex.backend
            first = backend.template_pid  # type: ignore[attr-defined]
            assert first is not None and _holds(os.getpid(), inode)  # the host keeps it
            pids = [first, *backend.worker_pids]  # type: ignore[attr-defined]
            assert [p for p in pids if _holds(p, inode)] == []
            os.kill(first, signal.SIGKILL)  # the next template is forked from the host, now
            end = time.monotonic() + BOUND_S
            while True:
                assert time.monotonic() < end, "the template was not replaced"
                result = ex.run([ToolCall("c", "add", {"a": 1, "b": 2})])[0]
                second = backend.template_pid  # type: ignore[attr-defined]
                if result.status == "ok" and second not in (None, first):
                    break
                time.sleep(0.05)
            pids = [second, *backend.worker_pids]  # type: ignore[attr-defined]
            assert [p for p in pids if _holds(p, inode)] == []
    finally:
        release(listener.fileno())
        listener.close()
    assert listener.fileno() == -1 and all(fd >= 0 for fd in HOST_FDS)


def test_a_listed_number_closed_without_release_and_reused_is_left_open_in_the_template(tmp_path: Any) -> None:
    """An owner that closed a listed descriptor without unregistering it (a stale entry), its number
    reused for the user's file: the template and its workers keep the user's file (the entry is checked
    against what it named when it was listed)."""
    r, w = os.pipe()
    host_only(r)
    path = tmp_path / "users.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    os.close(r)  # closed, never released
    os.dup2(fd, r)  # the stale number now names the user's file
    try:
        with Executor(ALL, mode="fork", workers=1) as ex:
            backend = ex.backend
            pids = [backend.template_pid, *backend.worker_pids]  # type: ignore[attr-defined]
            assert [os.readlink(f"/proc/{p}/fd/{r}") for p in pids] == [str(path)] * len(pids)
    finally:
        release(r)
        os.close(r)
        os.close(fd)
        os.close(w)
