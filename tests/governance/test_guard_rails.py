"""The guard-rail tier names every limit hit ``LimitExceeded``, however it was hit: threads that cannot
get a stack, a private mapping refused, a library that cannot be imported or allocate in C under
memory_mb, and CPU spent in C code that never returns to the interpreter under cpu_s (the kernel ends
that worker at the limit, as root and as an unprivileged user). Real forked workers, real rlimits."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import mmap
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.governance.executors import Executors, call
from tests.governance.forked import become_nobody
from toolfork import Limits, Tool
from toolfork.executor.types import ToolResult


def start_threads(n: int) -> str:
    """Start ``n`` threads that wait (each needs a stack of its own: 12 MiB here, so under a 32 MB budget
    the third stack cannot be mapped while what a started thread allocates still fits; a thread whose
    stack fits but whose start-up then cannot allocate would leave ``Thread.start()`` waiting for ever,
    which only the call's timeout can end)."""
    stop = threading.Event()
    started = []
    threading.stack_size(12 << 20)
    try:
        for _ in range(n):
            t = threading.Thread(target=stop.wait)
            t.start()
            started.append(t)
    finally:
        threading.stack_size(0)
        stop.set()
        for t in started:
            t.join()
    return str(len(started))


def private_map(mb: int) -> str:
    """Map ``mb`` MiB of private anonymous memory."""
    with mmap.mmap(-1, mb << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as m:
        return str(len(m))


def import_numpy_and_allocate(mb: int) -> str:
    """Import numpy (its libraries, its threads) in a fresh process and allocate ``mb`` MiB in C."""
    import numpy

    return str(numpy.ones(mb << 17).nbytes)  # 8-byte floats


def pbkdf2(rounds: int, marker: str) -> str:
    """One PBKDF2 call of ``rounds`` (OpenSSL's loop: never back in the interpreter until it ends)."""
    hashlib.pbkdf2_hmac("sha256", b"k", b"salt", rounds)
    Path(marker).write_text("finished")
    return "finished"


def _limit(r: ToolResult, name: str, message: str) -> None:
    assert r.status == "error" and r.error is not None, (r.status, r.output)
    assert r.error.type == "LimitExceeded" and message in r.error.message, (r.error.type, r.error.message)


def test_memory_limit_hit_by_threads_or_a_private_mapping_is_named(executors: Executors) -> None:
    tools = [Tool("threads", fn=start_threads, description="t", limits=Limits(memory_mb=32), timeout=30),
             Tool("mapped", fn=private_map, description="m", limits=Limits(memory_mb=64))]
    ex = executors(tools, workers=1)
    threads, mapped, small = executors.run(ex, [call(1, "threads", n=64), call(2, "mapped", mb=400),
                                                call(3, "mapped", mb=8)])
    _limit(threads, "memory_mb", "memory limit of 32 MB exceeded")
    _limit(mapped, "memory_mb", "memory limit of 64 MB exceeded")
    assert small.status == "ok", small.error  # the worker serves on, its limits restored


# Run in an interpreter of its own: another test of this process may have imported numpy already, and a
# template forked from here would then hold it (the import under the limit would be a no-op).
_NUMPY_UNDER_LIMITS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.governance.test_guard_rails import import_numpy_and_allocate
from toolfork import Limits, Tool
from toolfork.executor import Executor
from toolfork.executor.types import ToolCall

assert "numpy" not in sys.modules
# 2 MB: too little to map numpy's extension, so the import fails before any library constructor runs.
# A budget that lets OpenBLAS's constructor start and then fail meets its own exit paths (exit(1),
# raise(SIGINT), named as the limit too) and, rarely, a deadlock in that exit, which only the call's
# timeout ends.
tight = Tool("numpy_tight", fn=import_numpy_and_allocate, description="n", fresh_process=True,
             limits=Limits(memory_mb=2), timeout=30)
roomy = Tool("numpy_roomy", fn=import_numpy_and_allocate, description="n", fresh_process=True,
             limits=Limits(memory_mb=256), timeout=30)
with Executor([tight, roomy], workers=1) as ex:
    results = ex.run([ToolCall("1", "numpy_tight", {"mb": 1}), ToolCall("2", "numpy_roomy", {"mb": 1024}),
                      ToolCall("3", "numpy_roomy", {"mb": 8})])
print(json.dumps([[r.status, r.error.type if r.error else None, r.error.message if r.error else None]
                  for r in results]))
"""


def test_importing_numpy_and_allocating_in_c_under_memory_mb_is_named() -> None:
    if importlib.util.find_spec("numpy") is None:
        pytest.fail("numpy is part of the test environment (it comes with the bench extra's matplotlib): "
                    "install '.[all,test]'")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", _NUMPY_UNDER_LIMITS, str(root)], capture_output=True,
                          text=True, timeout=100, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    importing, allocating, fine = json.loads(proc.stdout.strip().splitlines()[-1])
    assert importing[:2] == ["error", "LimitExceeded"] and "memory limit of 2 MB exceeded" in importing[2], importing
    assert allocating[:2] == ["error", "LimitExceeded"] and "memory limit of 256 MB exceeded" in allocating[2], \
        allocating
    assert fine == ["ok", None, None], fine


def _rounds_for(cpu_s: float) -> int:
    start = time.process_time()
    hashlib.pbkdf2_hmac("sha256", b"k", b"salt", 100_000)
    return int(100_000 * cpu_s / max(time.process_time() - start, 1e-3))


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_cpu_spent_in_c_code_ends_at_the_limit_as_limit_exceeded(executors: Executors, tmp_path: Path,
                                                                  user: str) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test attacks as root and, through a worker that drops to nobody, as nobody: run it as root")
    marker = tmp_path / "finished.txt"
    os.chmod(tmp_path, 0o777)
    ex = executors([Tool("pbkdf2", fn=pbkdf2, description="p", limits=Limits(cpu_s=1))], workers=1,
                   on_worker_start=become_nobody if user == "nobody" else None)
    (r,) = executors.run(ex, [call(1, "pbkdf2", rounds=_rounds_for(12.0), marker=str(marker))])
    _limit(r, "cpu_s", "CPU time limit of 1 s exceeded")
    assert not marker.exists(), "the C loop ran to its end: nothing ended it at the limit"
