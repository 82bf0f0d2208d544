"""A sandboxed call keeps the executor's promises: it is stopped at its timeout even after leaving its
process group, a crash in it is named, a call that goes on fine returns, and nothing is left behind
(the suite-wide fixture of tests/conftest.py fails a test that leaves a process)."""

from __future__ import annotations

import os

from toolfork import Limits
from toolfork.executor import Executor
from toolfork.tools.tool import Tool


def hang(leave_group: bool) -> str:
    """Sleep far past the timeout, outside the worker's process group if asked."""
    import time

    if leave_group:
        os.setsid()
    time.sleep(60)
    return "woke"


def segfault() -> str:
    """Die of SIGSEGV (a real fault: the call is PID 1 of its namespace, which the kernel shields from
    signals it sends itself without a handler)."""
    import ctypes

    ctypes.string_at(0)
    return "survived"


def test_a_sandboxed_call_is_stopped_at_its_timeout_even_out_of_its_process_group() -> None:
    tool = Tool("hang", fn=hang, limits=Limits(network=False))
    with Executor([tool], workers=1, timeout=1.0, kill_grace=1.0) as ex:
        results = ex.run([{"id": "stay", "name": "hang", "arguments": {"leave_group": False}},
                          {"id": "leave", "name": "hang", "arguments": {"leave_group": True}}])
    assert [r.status for r in results] == ["timeout", "timeout"], [r.error for r in results]


def test_a_crash_in_the_sandbox_is_named() -> None:
    with Executor([Tool("segfault", fn=segfault, limits=Limits(sandbox=True))], workers=1, timeout=30) as ex:
        (r,) = ex.run([{"id": "1", "name": "segfault", "arguments": {}}])
    assert r.status == "crashed" and r.error is not None and "SIGSEGV" in r.error.message, r.error
