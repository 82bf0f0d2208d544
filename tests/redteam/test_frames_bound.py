"""Every frame a worker sends belongs to exactly one call: a tool that writes frames of its own on its
worker's result pipe or side socket fails (at most) the call of that worker, never another batch, and
every call returns.

The tools below find their worker's channels the way a hostile tool would: the highest write-only pipe
is the result pipe, the highest socket the side socket (the worker moves its channels to high numbers).
"""

from __future__ import annotations

import array
import os
import pickle
import socket
import stat
import threading
import time
from typing import Any

import pytest

from tests.redteam.hostile_tools import big_text, echo
from toolfork import ToolRuntime, tool
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.executor.wire import HEADER, MAGIC

BIG = 300_000  # over oob.LARGE_FRAME: a result by memory file over the side socket
FORGED = "FORGED BY ANOTHER BATCH"


def _channel(kind: str) -> int:
    """The worker's result pipe ("pipe") or side socket ("socket"): the highest fd of that kind."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            mode = os.fstat(fd).st_mode
            flags = __import__("fcntl").fcntl(fd, __import__("fcntl").F_GETFL)
        except OSError:
            continue
        if kind == "pipe" and stat.S_ISFIFO(mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            found.append(fd)
        elif kind == "socket" and stat.S_ISSOCK(mode):
            found.append(fd)
    return max(found)


def _framed(obj: Any) -> bytes:
    payload = pickle.dumps(obj)
    return HEADER.pack(MAGIC, len(payload)) + payload


@tool
def write_frame(shape: str) -> str:
    """Write a frame of its own on the result pipe, then return normally.

    Args:
        shape: short (a tagged frame of the wrong shape) | other_id (a well-formed frame of the old
            kind naming another batch's call) | future (a frame for a later call of this worker) | junk
    """
    frame = {"short": ("r",), "other_id": ("o", "b-0", FORGED, None, 0.0), "future": ("o", 7, FORGED, None, 0.0),
             "junk": {"not": "a frame"}}[shape]
    os.write(_channel("pipe"), _framed(frame))
    return "real"


@tool
def forge_on_side_socket(claims: str) -> str:
    """Put a forged large frame (a memory file) on the side socket with nothing announcing it: the next
    large frame of this worker would be read from it.

    Args:
        claims: the call id the forged frame names
    """
    fd = os.memfd_create("forged")
    os.write(fd, pickle.dumps(("o", claims, FORGED, None, 0.0)))
    sock = socket.socket(fileno=os.dup(_channel("socket")))
    sock.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    sock.detach()
    os.close(fd)
    return "sent"


@tool
def progress_later(runtime: ToolRuntime) -> str:
    """Return at once, leaving a thread that emits progress for this (finished) call a while longer."""
    def later() -> None:
        for i in range(40):
            time.sleep(0.005)
            runtime.emit_progress(i)

    threading.Thread(target=later, daemon=True).start()
    return "returned"


TOOLS = [write_frame, forge_on_side_socket, echo, big_text, progress_later]


def _in_threads(*batches: list[ToolCall], ex: Executor) -> list[list[ToolResult]]:
    """Each batch run by a thread of its own, at once; every thread must return (no hang)."""
    out: list[Any] = [None] * len(batches)

    def run(i: int) -> None:
        try:
            out[i] = ex.run(batches[i])
        except BaseException as exc:  # what a batch raised is the finding
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a batch never returned"
    for r in out:
        assert not isinstance(r, BaseException), f"a batch raised {r!r}"
    return out


def _echoes(tag: str, n: int) -> list[ToolCall]:
    return [ToolCall(f"{tag}-{i}", "echo", {"text": f"{tag}{i}"}) for i in range(n)]


def _all_echoed(results: list[ToolResult], tag: str) -> None:
    assert [r.status for r in results] == ["ok"] * len(results), [r.error for r in results if r.status != "ok"]
    assert [r.output.content[0].text for r in results] == [f"{tag}{i}" for i in range(len(results))]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("shape", ["short", "other_id", "future", "junk"])
def test_a_frame_not_its_calls_fails_only_the_call_that_wrote_it(shape: str) -> None:
    """Two threads' batches at once: the one whose tool writes a frame of its own gets ChannelDamaged for
    that call alone; the other thread's calls are all answered, and the pool serves on."""
    with Executor(TOOLS, mode="fork", workers=2, timeout=30) as ex:
        ex.run(_echoes("warm", 4))
        forger = [ToolCall("a-0", "write_frame", {"shape": shape}), *_echoes("a", 3)[1:]]
        a, b = _in_threads(forger, _echoes("b", 40), ex=ex)
        assert a[0].status == "error" and a[0].error.type == "ChannelDamaged", a[0]
        assert "replaced" in a[0].error.message
        assert [r.output.content[0].text for r in a[1:]] == ["a1", "a2"]
        _all_echoed(b, "b")
        assert not any(r.output is not None and FORGED in repr(r.output) for r in a + b)
        _all_echoed(ex.run(_echoes("after", 8)), "after")


@pytest.mark.timeout(180)
def test_a_forged_frame_on_the_side_socket_never_becomes_a_result() -> None:
    """A tool leaves a forged memory file on its worker's side socket. The next large result on that
    worker would be read from it: it fails ChannelDamaged instead (it is that worker's running call),
    the worker is replaced, and the large results after it come back whole, no call hanging."""
    with Executor(TOOLS, mode="fork", workers=1, timeout=30) as ex:
        [sent] = ex.run([ToolCall("a-0", "forge_on_side_socket", {"claims": "b-0"})])
        assert sent.status == "ok"
        b = ex.run([ToolCall("b-0", "big_text", {"n": BIG}), ToolCall("b-1", "big_text", {"n": BIG + 1})])
        assert b[0].status == "error" and b[0].error.type == "ChannelDamaged", b[0]
        assert b[1].status == "ok" and b[1].output.content[0].text == "b" * (BIG + 1)
        after = ex.run([ToolCall(f"c-{i}", "big_text", {"n": BIG + i}) for i in range(3)])
        assert [r.output.content[0].text for r in after] == ["b" * (BIG + i) for i in range(3)]


@pytest.mark.timeout(120)
def test_a_late_progress_of_a_finished_call_is_dropped_not_damage() -> None:
    """Progress a finished call's thread still emits belongs to that call: it is dropped, and the calls
    that run on the same worker meanwhile are not touched."""
    with Executor(TOOLS, mode="fork", workers=1, timeout=30) as ex:
        [r] = ex.run([ToolCall("p", "progress_later")])
        assert r.status == "ok"
        pid = r.worker_pid
        end = time.monotonic() + 1.0  # past the late thread's 40 values, 5 ms apart
        while time.monotonic() < end:
            after = ex.run([ToolCall(f"e{i}", "echo", {"text": f"e{i}"}) for i in range(20)])
            _all_echoed(after, "e")
            assert {r.worker_pid for r in after} == {pid}  # the same worker: nothing was damaged
