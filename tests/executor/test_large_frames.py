"""Large results and arguments cross by memory file (toolfork.executor.wire.oob): they arrive whole and in
order, and no memory file, mapping or /dev/shm entry is left behind after a crash, a timeout, close()
or a SIGKILL of the host."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.executor import tools_for_tests as T
from tests.procs import all_gone
from toolfork.executor import ToolCall
from toolfork.executor.wire import oob
from toolfork.tools import ToolOutput, tool

MEMFD_NAME = "memfd:toolfork-frame"
LARGE = oob.LARGE_FRAME + 1000

pytestmark = pytest.mark.skipif(not oob.available(), reason="memfd_create is Linux-only")


@tool
def table(rows: int) -> list[dict[str, object]]:
    """Return a list of dicts."""
    return [{"id": i, "name": f"row {i}", "ok": i % 2 == 0} for i in range(rows)]


@tool
def blob(n: int) -> ToolOutput:
    """Return n bytes in a file block."""
    return ToolOutput.file(bytes(range(256)) * (n // 256), media_type="application/octet-stream", name="b.bin")


@tool
def measure(text: str, data: bytes) -> list[int]:
    """Return the length and a checksum of large arguments."""
    return [len(text), len(data), sum(data[::4096])]


TOOLS = [*T.ALL, table, blob, measure]


def _memfds(pid: int) -> int:
    """How many descriptors of our memory files ``pid`` holds, plus its mappings of them."""
    count = 0
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}").startswith("/" + MEMFD_NAME):
                    count += 1
            except OSError:
                pass
        with open(f"/proc/{pid}/maps") as f:
            count += sum(1 for line in f if MEMFD_NAME in line)
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return count


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _ours(names: set[str], pids: list[int]) -> set[str]:
    """/dev/shm entries that could be ours (other suites on the machine make their own meanwhile)."""
    return {n for n in names if "toolfork" in n or any(str(p) in n for p in pids)}


def test_large_str_bytes_and_rows_results_arrive_whole(make_executor):
    ex = make_executor(TOOLS, mode="fork", workers=2)
    text, rows, data = ex.run([
        ToolCall("s", "big", {"n": 3_000_000}),
        ToolCall("r", "table", {"rows": 40_000}),
        ToolCall("f", "blob", {"n": 2_000_000}),
    ])
    assert text.status == "ok" and text.output.content[0].text == "x" * 3_000_000
    assert rows.status == "ok" and len(rows.output.data) == 40_000 and rows.output.data[39_999]["name"] == "row 39999"
    assert data.status == "ok"
    expected = ToolOutput.file(bytes(range(256)) * (2_000_000 // 256), media_type="application/octet-stream")
    assert data.output.content[0].data == expected.content[0].data
    # Beyond the reusable file's budget: a file of its own, freed at once; the worker still answers.
    [huge] = ex.run([ToolCall("h", "big", {"n": oob.KEEP_BYTES + 5_000_000})])
    assert huge.status == "ok" and len(huge.output.content[0].text) == oob.KEEP_BYTES + 5_000_000
    [small] = ex.run([ToolCall("a", "add", {"a": 1, "b": 2})])
    assert small.output.data == 3


def test_large_arguments_reach_the_worker(make_executor):
    ex = make_executor(TOOLS, mode="fork", workers=1)
    data = os.urandom(3_000_000)
    [r] = ex.run([ToolCall("m", "measure", {"text": "é" * 1_000_000, "data": data})])
    assert r.status == "ok", r.error
    assert r.output.data == [1_000_000, 3_000_000, sum(data[::4096])]


def test_many_large_results_from_one_chunk_come_back_in_order(make_executor):
    """Quick calls go in chunks: each worker sends its next large result only after the host took
    the previous one (the in-flight bound), and nothing is lost or reordered on the way."""
    ex = make_executor(TOOLS, mode="fork", workers=2)
    ex.run([ToolCall(str(i), "big", {"n": 10}) for i in range(8)])  # learn that the tool is quick
    calls = [ToolCall(str(i), "big", {"n": LARGE + i}) for i in range(40)]
    results = ex.run(calls)
    assert [r.status for r in results] == ["ok"] * 40
    assert [len(r.output.content[0].text) for r in results] == [LARGE + i for i in range(40)]


def test_a_large_result_that_cannot_be_rebuilt_fails_only_its_call(make_executor):
    ex = make_executor(TOOLS, mode="fork", workers=1)

    @tool
    def odd(n: int) -> ToolOutput:
        """A large text with a value the host cannot rebuild."""
        return ToolOutput(content=ToolOutput.text("y" * n).content, data=_unrebuildable())

    ex.add_tools([odd])
    bad, good = ex.run([ToolCall("o", "odd", {"n": LARGE}), ToolCall("b", "big", {"n": LARGE})])
    assert bad.status == "error" and "could not be rebuilt" in bad.error.message
    assert good.status == "ok" and len(good.output.content[0].text) == LARGE


class _Unrebuildable:
    def __init__(self, a: int, *, must: int) -> None:  # rebuilt from (a,) only: raises in the host
        self.a = a

    def __reduce__(self) -> tuple[object, tuple[int]]:
        return (_Unrebuildable, (self.a,))


def _unrebuildable() -> _Unrebuildable:
    value = object.__new__(_Unrebuildable)
    value.a = 1
    return value


def test_nothing_is_left_after_a_crash_a_timeout_and_close(make_executor):
    before = _shm()
    me = os.getpid()
    ex = make_executor(TOOLS, mode="fork", workers=1)
    first = ex.backend.worker_pids
    ex.run([ToolCall("b1", "big", {"n": LARGE})])
    assert _memfds(me) > 0  # the worker's reusable file: descriptors and a mapping in the host
    [crash] = ex.run([ToolCall("c", "exit_now", {"code": 3})])
    assert crash.status == "crashed"
    assert _memfds(me) == 0  # the dead worker's file went with it

    second = ex.backend.worker_pids
    ex.run([ToolCall("b2", "big", {"n": LARGE})])
    assert _memfds(me) > 0
    [slow] = ex.run([ToolCall("t", "sleep_for", {"seconds": 5}, timeout=0.3)])
    assert slow.status == "timeout"
    assert _memfds(me) == 0

    ex.run([ToolCall("b3", "big", {"n": LARGE})])
    last = ex.backend.worker_pids
    ex.close()
    assert _memfds(me) == 0
    assert all_gone([*first, *second, *last], 5.0) == []
    assert _ours(_shm() - before, [me, *first, *second, *last]) == set()


def _memfd_bytes(pid: int) -> int:
    """The bytes of the memory files ``pid`` holds (each file once, however many descriptors)."""
    sizes: dict[int, int] = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("/" + MEMFD_NAME):
                st = os.stat(f"/proc/{pid}/fd/{name}")
                sizes[st.st_ino] = st.st_size
        except OSError:
            pass
    return sum(sizes.values())


def test_a_result_beyond_the_reused_file_is_not_kept_after_it_is_read(make_executor):
    """A worker writes large results into its reusable file; one that outgrows the budget leaves with
    that file, and the host, which had the file mapped for reuse, must let go of it too."""
    ex = make_executor(TOOLS, mode="fork", workers=1)
    ex.run([ToolCall("small", "big", {"n": LARGE})])
    assert 0 < _memfd_bytes(os.getpid()) <= oob.KEEP_BYTES  # the reusable file, kept on purpose
    huge = oob.KEEP_BYTES + (4 << 20)
    [r] = ex.run([ToolCall("huge", "big", {"n": huge})])
    assert len(r.output.as_text()) == huge
    assert _memfd_bytes(os.getpid()) == 0  # nothing in flight: nothing held
    assert [_memfd_bytes(pid) for pid in ex.backend.worker_pids] == [0]  # nor in the worker
    ex.run([ToolCall("again", "big", {"n": LARGE})])  # a new reusable file
    assert 0 < _memfd_bytes(os.getpid()) <= oob.KEEP_BYTES


def test_sigkill_of_the_host_leaves_no_process_or_memory_file(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from tests.executor import tools_for_tests as T
        from toolfork.executor import Executor, ToolCall
        ex = Executor(T.ALL, mode="fork", workers=2)
        ex.run([ToolCall(str(i), "big", {{"n": {LARGE}}}) for i in range(6)])
        print(" ".join(map(str, [ex.backend.template_pid, *ex.backend.worker_pids])), flush=True)
        # Keep large results coming until killed (one is often in flight at the kill).
        i = 0
        while True:
            ex.run([ToolCall(f"k{{i}}-{{j}}", "big", {{"n": {4 * LARGE}}}) for j in range(4)])
            i += 1
    """)
    before = _shm()
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        pids = [int(p) for p in line.split()]
        assert len(pids) == 3, line
        time.sleep(0.3)
        assert any(_memfds(p) for p in [proc.pid, *pids])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert all_gone(pids, 10.0) == []
        assert all(_memfds(p) == 0 for p in pids)
        assert _ours(_shm() - before, [proc.pid, *pids]) == set()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_side_port_round_trip_and_in_flight_bound():
    """The protocol itself: frames by file of their own and by the reusable file, the sender waits
    for the acknowledgement before its next large frame, and close() lets every descriptor go."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    sender, reader = oob.SidePort(a), oob.SidePort(b)
    try:
        sender.dump(w, ("o", "1", "a" * LARGE, None, 0.0), wait_ack=True)
        assert os.read(r, 16) == oob.OOB_HEADER
        assert reader.take(block=False, ack=True)[2] == "a" * LARGE
        sender.send_payload(w, b"\x80\x05K\x07.", wait_ack=True)  # waits for the ack sent above
        assert os.read(r, 16) == oob.OOB_HEADER and reader.take(block=False, ack=False) == 7
        done = threading.Event()

        def third() -> None:
            sender.dump(w, "c" * LARGE, wait_ack=True)  # no ack yet for the second: it must wait
            done.set()

        t = threading.Thread(target=third)
        t.start()
        assert not done.wait(0.3)
        reader.sock.send(b"A")
        assert done.wait(5.0)
        t.join()
        assert os.read(r, 16) == oob.OOB_HEADER and reader.take(block=False, ack=True) == "c" * LARGE
        with pytest.raises(oob.OobError):
            reader.take(block=False, ack=False)
    finally:
        sender.close()
        reader.close()
        os.close(r)
        os.close(w)
    assert _memfds(os.getpid()) == 0


def test_without_memory_files_large_frames_go_through_the_pipe(make_executor, monkeypatch):
    """Where memfd_create does not exist (not Linux) every frame takes the pipe, as before."""
    monkeypatch.setattr(oob, "ENABLED", False)
    ex = make_executor(TOOLS, mode="fork", workers=1)  # forked now: the workers see ENABLED False too
    data = os.urandom(LARGE)
    text, args = ex.run([ToolCall("s", "big", {"n": 2 * LARGE}),
                         ToolCall("m", "measure", {"text": "t" * LARGE, "data": data})])
    assert text.status == "ok" and len(text.output.content[0].text) == 2 * LARGE
    assert args.status == "ok" and args.output.data == [LARGE, LARGE, sum(data[::4096])]
    assert _memfds(os.getpid()) == 0
