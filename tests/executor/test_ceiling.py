"""The ceiling on what the host rebuilds (``wire.ceiling``), below the executor: the data-only decoder
counts what it rebuilds (shared references as copies) and stops past the ceiling; a frame small enough
to be rebuilt uncounted cannot pass it; a memory file is mapped at the length its message declares,
only when it is sealed against shrinking and that long, and never when that length is over the ceiling."""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire import ceiling, dataonly, oob
from toolfork.tools.output import ContentBlock, ToolOutput
from toolfork.tools.runtime import ToolRuntime

N = 50_000
# The values that rebuild into the most per byte sent: empty containers, one-entry dicts, small
# negative ints (not cached), two-character strings, short tuples.
DENSE: dict[str, Any] = {
    "{}": [{}] * N, "[]": [[]] * N, "{'': {}}": [{"": {}}] * N, "{'': []}": [{"": []}] * N,
    "{'a': 1}": [{"a": 1}] * N, "-20": [-20] * N, "'ab'": ["ab"] * N, "(0,)": [(0,)] * N,
    "[[], []]": [[[], []]] * N, "{'a': {}, 'b': {}}": [{"a": {}, "b": {}}] * N,
}


@pytest.mark.parametrize("name", sorted(DENSE))
def test_no_input_rebuilds_past_max_growth_per_byte(name: str) -> None:
    data = dataonly.encode(DENSE[name])
    tracemalloc.start()
    try:
        value = dataonly.decode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value == DENSE[name]
    assert peak <= dataonly.MAX_GROWTH * len(data), (name, peak / len(data))


def test_shared_references_count_as_copies_and_stop_at_the_ceiling() -> None:
    row = [{} for _ in range(1000)]
    data = dataonly.encode(("r", 0, "ok", None, None, 1.0, {"rows": [row] * 2000}))  # 2 MB sent, ~140 MB rebuilt
    with pytest.raises(ceiling.TooLarge, match=r"over the ceiling of 16 MB; raise it with the tool setting "
                                               r"max_result_mb \(toolfork run: --max-result-mb\)"):
        dataonly.decode(data, 16 * ceiling.MB)
    marker = dataonly.decode_or_marker(data, 16 * ceiling.MB)
    assert ceiling.is_marker(marker) and marker[1] == "ResultTooLarge"
    assert dataonly.decode(data, 1024 * ceiling.MB)[6]["rows"][1999] == row  # under a ceiling it fits


def test_one_long_list_is_refused_before_its_items_are_counted() -> None:
    data = dataonly.encode([-20] * 300_000)  # 300 kB: past the uncounted size of a 16 MB ceiling
    with pytest.raises(ceiling.TooLarge, match="a list or dict of more than"):
        dataonly.decode(data, 16 * ceiling.MB)


def test_a_large_text_is_rebuilt_once_not_once_per_level() -> None:
    """A result is a tuple holding a ToolOutput holding a block: the text is not copied per level."""
    text = "x" * 20_000_000
    data = dataonly.encode(("r", 0, "ok", ToolOutput([ContentBlock("text", text)]), None, 1.0, None))
    tracemalloc.start()
    try:
        value = dataonly.decode(data, 64 * ceiling.MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value[3].content[0].text == text
    assert peak < 1.5 * len(text), peak


def test_tuples_and_registered_objects_round_trip_and_marks_stay_in_place() -> None:
    value = ("r", (1, (2, ())), ToolResult("c", "t", "error", None, ErrorInfo("E", "m"), 0.5, 7, {"k": (1,)}))
    for limit in (None, 1):  # uncounted, and counted (any ceiling past what this rebuilds)
        assert dataonly.decode(dataonly.encode(value), None if limit is None else 64 * ceiling.MB) == value
    mark = dataonly._TUPLE_MARK
    for forged in ([1, mark], {"a": mark}, [dataonly._OBJECT_MARK, "ToolOutput", []], [dataonly._OBJECT_MARK, "os"]):
        with pytest.raises(ValueError):
            dataonly.decode(dataonly.encode(forged))


@pytest.fixture
def ports() -> Iterator[tuple[socket.socket, oob.SidePort, int, int]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    reader = oob.SidePort(b)
    try:
        yield a, reader, r, w
    finally:
        reader.close()
        a.close()
        os.close(r)
        os.close(w)


def _memory_file(content: bytes, size: int, seal: bool) -> int:
    fd = os.memfd_create("test", os.MFD_ALLOW_SEALING)
    os.write(fd, content)
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


def _hand(sock: socket.socket, message: bytes, fd: int) -> None:
    try:
        socket.send_fds(sock, [message], [fd])
    finally:
        os.close(fd)


def test_a_memory_file_is_read_at_its_declared_length(ports: Any) -> None:
    sock, reader, _r, _w = ports
    payload = dataonly.encode(("p", 0, "hello"))
    _hand(sock, b"F" + struct.pack("<Q", len(payload)), _memory_file(payload, 1 << 30, seal=True))
    assert reader.take(block=False, ack=False, loads=dataonly.decode) == ("p", 0, "hello")


@pytest.mark.parametrize("case", ["unsealed", "shorter", "over_ceiling", "reusable_over_budget"])
def test_a_memory_file_that_is_not_what_its_message_says_is_not_mapped(ports: Any, case: str) -> None:
    sock, reader, _r, _w = ports
    payload = dataonly.encode(("p", 0, "hello"))
    declared = {"shorter": 1 << 20, "over_ceiling": 1 << 30, "reusable_over_budget": oob.KEEP_BYTES + 1}
    size = declared.get(case, len(payload))
    kind = b"P" if case == "reusable_over_budget" else b"F"
    _hand(sock, kind + struct.pack("<Q", size), _memory_file(payload, len(payload), seal=case != "unsealed"))
    if case == "over_ceiling":
        got = reader.take(block=False, ack=False, loads=dataonly.decode, ceiling=ceiling.DEFAULT)
        assert ceiling.is_marker(got) and "a frame of 1024 MB" in got[2]
        return
    with pytest.raises(oob.OobError, match={"unsealed": "not sealed", "shorter": "announced as holding",
                                            "reusable_over_budget": "reusable"}[case]):
        reader.take(block=False, ack=False, loads=dataonly.decode)


def big_text(n: int) -> str:
    """A text of ``n`` characters."""
    return "y" * n


def big_progress(n: int, runtime: ToolRuntime) -> str:
    """One progress value of ``n`` characters, then a short result (a tool that swallows what emitting
    it raised)."""
    try:
        runtime.emit_progress("p" * n)
    except Exception:
        pass
    return "done"


def test_a_warm_frame_longer_than_its_ceiling_fails_its_call_and_the_pool_goes_on() -> None:
    """A warm worker's frames are pickles (a warm tool is trusted): bounded by their length."""
    from toolfork import Tool
    from toolfork.executor import Executor

    tools = [Tool("small", fn=big_text, max_result_mb=1), Tool("roomy", fn=big_text)]
    with Executor(tools, mode="fork", workers=1, timeout=60) as ex:
        over, fits, after = ex.run([{"id": "a", "name": "small", "arguments": {"n": 3_000_000}},
                                    {"id": "b", "name": "roomy", "arguments": {"n": 3_000_000}},
                                    {"id": "c", "name": "small", "arguments": {"n": 10}}])
    assert over.status == "error" and over.error is not None and over.error.type == "ResultTooLarge", over
    assert "over the ceiling of 1 MB" in over.error.message
    assert fits.status == "ok" and fits.output is not None and len(fits.output.content[0].text) == 3_000_000
    assert after.status == "ok"


def test_a_session_call_is_bounded_by_its_tools_ceiling() -> None:
    """A session's process sends its frames to the host as a pool worker does: the tool's max_result_mb
    bounds them, not the default."""
    from tests.executor.session_tools import Account
    from toolfork import Tool
    from toolfork.executor import Executor, ToolCall

    tools = [Tool("small", fn=big_text, max_result_mb=1), Tool("roomy", fn=big_text)]
    with Executor(tools, mode="fork", workers=1, timeout=60) as ex, ex.session(Account, "ada") as s:
        over, fits, after = s.run([ToolCall("a", "small", {"n": 3_000_000}), ToolCall("b", "roomy", {"n": 3_000_000}),
                                   ToolCall("c", "small", {"n": 10})])
    assert over.status == "error" and over.error is not None and over.error.type == "ResultTooLarge", over
    assert "over the ceiling of 1 MB" in over.error.message
    assert fits.status == "ok" and fits.output is not None and len(fits.output.content[0].text) == 3_000_000
    assert after.status == "ok", after


def test_the_run_command_sets_the_ceiling_of_tools_that_set_none(tmp_path: Any) -> None:
    import json

    from tests.redteam.conftest import toolfork

    calls = tmp_path / "calls.jsonl"
    calls.write_text(json.dumps({"id": "1", "name": "big_text", "arguments": {"n": 3_000_000}}) + "\n")
    done = toolfork("run", str(calls), "--tools", "tests.executor.test_ceiling:big_text", "--mode", "fork",
                    "--max-result-mb", "1", "-q")
    (record,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert record["status"] == "error" and record["error"]["type"] == "ResultTooLarge", record
    bad = toolfork("run", str(calls), "--tools", "tests.executor.test_ceiling:big_text", "--max-result-mb", "0")
    assert bad.returncode == 2 and b"--max-result-mb" in bad.stderr


def test_every_data_only_value_the_host_rebuilds_is_within_the_ceiling() -> None:
    """The other places a sandboxed call's data is decoded in the host: an adapter function's outcome
    (carried as bytes inside its result) and a request on ``mcp serve``'s callback socket."""
    from toolfork.adapters.callables import UnsendableResult, _data_outcome
    from toolfork.mcp.callback import decode_request

    rows = [[{} for _ in range(1000)]] * 12_000  # 12 MB sent, 850 MB to rebuild
    with pytest.raises(UnsendableResult, match="result too large"):
        _data_outcome(dataonly.encode(("ok", rows)))
    with pytest.raises(ValueError, match="result too large"):
        decode_request(dataonly.encode(("id", "path", (rows,), {})))
    import msgpack

    from toolfork.mcp import callback

    wrapped = msgpack.ExtType(callback._MODEL, dataonly.encode(("m", "M", {"rows": rows})))  # decoded by its hook
    with pytest.raises(ValueError, match="result too large"):
        decode_request(dataonly.encode(("id", "path", (wrapped,), {})))
