"""The suite-wide process guard (tests/conftest.py) sees what psutil sees: every descendant of the test
process, grandchildren included, from a thread other than the main one too, and none once they are gone."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import psutil

from tests.conftest import _descendant_pids

# A child that starts a grandchild, prints its pid, then waits for its stdin to close.
TREE = ("import subprocess, sys; g = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'], "
        "stdin=subprocess.PIPE); print(g.pid, flush=True); sys.stdin.read(); g.kill(); g.wait()")


def _start_tree(started: list[subprocess.Popen[str]]) -> None:
    started.append(subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True))


def test_children_and_grandchildren_are_found_whichever_thread_started_them() -> None:
    started: list[subprocess.Popen[str]] = []
    _start_tree(started)
    helper = threading.Thread(target=_start_tree, args=(started,))  # a child of another thread of ours
    helper.start()
    helper.join(30)
    try:
        assert started[0].stdout is not None and started[1].stdout is not None
        grandchildren = {int(p.stdout.readline()) for p in started if p.stdout is not None}
        tree = {p.pid for p in started} | grandchildren
        found = _descendant_pids()
        assert tree <= found, f"missing: {tree - found}"
        assert tree <= {p.pid for p in psutil.Process().children(recursive=True)}  # what psutil sees too
    finally:
        for p in started:
            assert p.stdin is not None
            p.stdin.close()
            p.wait(30)
            assert p.stdout is not None
            p.stdout.close()
    end = time.monotonic() + 30
    while tree & _descendant_pids() and time.monotonic() < end:
        time.sleep(0.02)
    assert not tree & _descendant_pids()
