"""The wire module: bytes on descriptors, the wake-up pipe, the frame header and the frame kinds, and
the reader and writer built on them (framing), on real pipes and socket pairs."""

from __future__ import annotations

import ast
import os
import pickle
import select
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire import WakePipe, drain, frames, framing, oob, write_all
from toolfork.executor.wire.frames import HEADER, MAGIC, OOB_HEADER, ChannelDamaged, check_header, frame
from toolfork.tools.output import ContentBlock, ToolOutput

PACKAGE = Path(framing.__file__).parent


# ----------------------------------------------------------------------------- pipes

def test_write_all_writes_everything_through_a_pipe_smaller_than_the_data():
    r, w = os.pipe()
    data = os.urandom(3 << 20)  # many times a pipe's capacity: os.write takes it in pieces
    got = bytearray()

    def read() -> None:
        while chunk := os.read(r, 1 << 16):
            got.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        write_all(w, data)
    finally:
        os.close(w)
        reader.join(30)
        os.close(r)
    assert bytes(got) == data


def test_wake_pipe_wakes_a_select_never_blocks_and_drains():
    wake = WakePipe()
    try:
        assert select.select([wake.fd], [], [], 0)[0] == []
        for _ in range(200_000):  # far more than the pipe holds: a full pipe is already "awake"
            wake.wake()
        assert select.select([wake.fd], [], [], 5)[0] == [wake.fd]
        wake.drain()
        assert select.select([wake.fd], [], [], 0)[0] == []
    finally:
        wake.close()
    wake.wake()  # closed: a late waker is not an error
    wake.close()


def test_drain_leaves_a_bad_descriptor_alone():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    drain(r)  # no exception


# ----------------------------------------------------------------------------- header

def test_header_holds_a_tag_a_text_write_cannot_carry():
    tag = HEADER.pack(MAGIC, 0)[:4]
    assert b"\0" in tag and any(b > 0x7F for b in tag)
    assert OOB_HEADER == HEADER.pack(MAGIC, 0)
    assert frame(b"xyz") == HEADER.pack(MAGIC, 3) + b"xyz"


def test_check_header_refuses_a_wrong_tag_and_a_length_over_the_bound():
    check_header(MAGIC, 10, 10)
    with pytest.raises(ChannelDamaged, match="not a toolfork frame"):
        check_header(0x7FFFFFFF, 4, 1 << 20)
    with pytest.raises(ChannelDamaged, match="bound"):
        check_header(MAGIC, 11, 10)


# ----------------------------------------------------------------------------- frame kinds

def test_frame_kinds_are_distinct_one_letter_names():
    kinds = [frames.CALLS, frames.LINES, frames.TOOLS, frames.RESULT, frames.TEXT, frames.ENCODED,
             frames.PROGRESS, frames.MISMATCH, frames.LEAVING, frames.BAD_FRAME]
    assert len(set(kinds)) == len(kinds) and all(len(k) == 1 for k in kinds)
    assert frames.RESULT_KINDS == {frames.RESULT, frames.TEXT, frames.ENCODED, frames.LEAVING}


def _roundtrip(f: tuple[Any, ...], name: str = "t") -> ToolResult:
    msg = frames.decode(pickle.loads(pickle.dumps(f)))
    assert msg is not None and msg.seq == f[1]
    return msg.rebuilt("c1", name, 42)  # type: ignore[union-attr]


def test_each_result_encoder_has_its_decoder():
    text = ToolResult("c1", "t", "ok", ToolOutput([ContentBlock("text", "hello")], False, {"k": 1}), None, 0.5)
    f = frames.result_frame(1, text)
    assert f[0] == frames.TEXT
    back = _roundtrip(f)
    assert (back.status, back.output.content[0].text, back.output.data, back.worker_pid) == ("ok", "hello", {"k": 1},
                                                                                             42)
    assert (back.error, back.duration_s, back.context_updates, back.encoded) == (None, 0.5, None, None)

    error = ToolResult("c2", "t", "error", None, ErrorInfo("ValueError", "bad"), 0.25, context_updates={"a": 1})
    f = frames.result_frame(2, error)
    assert f[0] == frames.RESULT
    back = _roundtrip(f)
    assert (back.status, back.error.type, back.error.message, back.context_updates) == ("error", "ValueError", "bad",
                                                                                        {"a": 1})
    assert (back.output, back.duration_s, back.worker_pid, back.encoded) == (None, 0.25, 42, None)

    f = frames.result_frame(1, text, encode=lambda r: b'{"id": "c1"}\n')
    assert f[0] == frames.ENCODED
    back = _roundtrip(f)
    assert (back.status, back.encoded, back.output, back.duration_s, back.worker_pid) == (
        "ok", b'{"id": "c1"}\n', None, 0.5, 42)
    assert frames.result_frame(1, text, encode=lambda r: None)[0] == frames.TEXT  # not encoded: as itself

    back = _roundtrip(frames.leaving_frame(3, "closed or replaced the worker's side socket"), "closer")
    assert back.status == "error" and back.error.type == "ChannelDamaged"
    assert "tool 'closer' closed or replaced the worker's side socket" in back.error.message


@pytest.mark.parametrize("frame", [
    ("o", 1, "text", None),  # a field short
    ("o", "c1", "text", None, 0.1),  # a call id where the seq goes (the frames of before)
    ("o", 1, b"not str", None, 0.1),
    ("r", 1, "fine", None, None, 0.1, None),  # not a status
    ("r", 1, ["ok"], None, None, 0.1, None),  # unhashable where the status goes
    ("r", 1, "ok", "not an output", None, 0.1, None),
    ("r", 1, "error", None, "not an ErrorInfo", 0.1, None),
    ("r", 1, "ok", None, None, 0.1, ["not", "a", "dict"]),
    ("e", 1, "str, not bytes", 0.1),
    ("x", 1, 42),
    ("p", 1),
    ("m", 1, "extra"),
    ("z", 1, "unknown kind"),
    ([], 1),  # an unhashable kind
    (True, 1),
    ("o", True, "t", None, 0.1),  # a bool is not a seq
    ("o", 1, "t", None, True),
    "a string", None, 42, (), ("o",), ["o", 1, "t", None, 0.1],
])
def test_decode_refuses_every_frame_not_the_shape_of_a_message(frame: Any) -> None:
    assert frames.decode(frame) is None
    assert "wrong shape" in frames.describe_shape(frame)


def test_decode_names_each_message() -> None:
    assert frames.decode(("p", 3, {"v": 1})) == frames.Progress(3, {"v": 1})
    assert frames.decode(("m", 4)) == frames.Mismatch(4)
    assert type(frames.decode(("e", 5, b"line\n", 0.5))) is frames.EncodedResult
    assert frames.decode(("x", 6, "closed it")) == frames.Leaving(6, "closed it")


def test_looks_large_measures_text_and_data_without_pickling():
    small = frames.result_frame(0, ToolResult("c", "t", "ok", ToolOutput([ContentBlock("text", "x" * 10)])))
    big = frames.result_frame(0, ToolResult("c", "t", "ok", ToolOutput([ContentBlock("text", "x" * 100)])))
    assert not frames.looks_large(small, 100) and frames.looks_large(big, 100)
    assert not frames.looks_large(frames.progress_frame(0, "x" * 1000), 100)


# ----------------------------------------------------------------------------- the reader's checks

def _reader_on(data: bytes, side: oob.SidePort | None = None) -> tuple[framing.FrameReader, list[Any], int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    write_all(w, data)
    reader = framing.FrameReader(r, side)
    return reader, reader.read(), r, w


def test_the_reader_stops_at_bytes_that_are_not_a_frame_and_keeps_what_came_before():
    good = framing.encode(("o", "c1", "first", None, 0.1))
    reader, out, r, w = _reader_on(good + b"\xff\xff\xff\x7f" + good)
    try:
        assert out == [("o", "c1", "first", None, 0.1)]
        assert reader.eof and reader.damaged is not None and "not a toolfork frame" in reader.damaged
        write_all(w, good)
        assert reader.read() == []  # nothing after damage is trusted
    finally:
        os.close(r)
        os.close(w)


def test_a_reader_with_a_side_socket_refuses_pipe_frames_of_the_large_frame_size():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    side = oob.SidePort(b)
    try:
        reader, out, r, w = _reader_on(HEADER.pack(MAGIC, oob.LARGE_FRAME + 1), side)
        assert out == [] and reader.damaged is not None and "bound" in reader.damaged
        os.close(r)
        os.close(w)
        plain, out, r, w = _reader_on(HEADER.pack(MAGIC, oob.LARGE_FRAME + 1))  # no side socket: 4 GiB bound
        assert out == [] and plain.damaged is None and not plain.eof
        os.close(r)
        os.close(w)
    finally:
        side.close()
        a.close()


def test_a_large_frame_announced_without_its_message_or_with_a_stray_one_is_damage():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    side = oob.SidePort(b)
    try:
        reader, out, r, w = _reader_on(OOB_HEADER, side)  # nothing on the side socket
        assert out == [] and reader.damaged is not None and "could not be received" in reader.damaged
        os.close(r)
        os.close(w)
        a.send(b"\xff\xff\xff\x7f")  # what a stray write on the worker's end looks like
        reader, out, r, w = _reader_on(OOB_HEADER, side)
        assert out == [] and reader.damaged is not None and "unexpected message" in reader.damaged
        os.close(r)
        os.close(w)
    finally:
        side.close()
        a.close()


def test_recv_blocking_refuses_a_frame_without_the_tag():
    r, w = os.pipe()
    try:
        os.write(w, b"\x05\x00\x00\x00hello")
        with pytest.raises(ChannelDamaged):
            framing.recv_blocking(r)
    finally:
        os.close(r)
        os.close(w)


def _write_in_pieces(w: int, data: bytes, cut: int) -> threading.Thread:
    writer = threading.Thread(target=lambda: [write_all(w, data[i:i + cut]) for i in range(0, len(data), cut)])
    writer.start()
    return writer


@pytest.mark.parametrize("ahead", [True, False])
def test_the_call_reader_gives_each_frame_whole_however_the_bytes_come(ahead: bool) -> None:
    """A worker's reader, reading ahead (what the pipe holds) or exactly: frames that arrive together,
    split anywhere (inside the header too), and one larger than a read each come out whole and in
    order; EOF inside a frame is EOF."""
    small: list[Any] = [("c", [("a", "t", {"x": i}, None)]) for i in range(3)]
    large: list[Any] = [*small, ("c", "L" * (3 * framing.READ_CHUNK))]
    for sent, cut in ((small, 1), (small, 5), (large, 4096)):
        data = b"".join(framing.encode(f) for f in sent)
        r, w = os.pipe()
        reader = framing.CallReader(r, None, threading.Lock(), ahead=ahead)
        writer = _write_in_pieces(w, data, cut)  # the reader reads meanwhile
        try:
            got = [reader.recv() for _ in sent]
        finally:
            writer.join(30)
        assert got == sent, cut
        write_all(w, data[: len(framing.encode(sent[0])) + 12])  # a frame and a piece of the next one
        os.close(w)
        assert reader.recv() == sent[0]
        with pytest.raises(EOFError):  # the host went in the middle of a frame
            while True:
                reader.recv()
        os.close(r)


def test_the_call_reader_refuses_bytes_that_are_not_a_frame_after_good_ones():
    r, w = os.pipe()
    try:
        write_all(w, framing.encode(("c", [])) + b"\x05\x00\x00\x00hello...")
        reader = framing.CallReader(r, None, threading.Lock(), ahead=True)
        assert reader.recv() == ("c", [])
        with pytest.raises(ChannelDamaged):
            reader.recv()
    finally:
        os.close(r)
        os.close(w)


# ----------------------------------------------------------------------------- the writer, from threads

@pytest.mark.skipif(not oob.available(), reason="memory files are Linux-only")
@pytest.mark.timeout(120)
def test_frames_from_many_threads_arrive_whole_small_and_large_alike():
    """8 threads send through one FrameWriter at once, every 5th frame by memory file: each frame
    arrives whole and each thread's frames in its order."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    os.set_blocking(r, False)
    writer = framing.FrameWriter(w, oob.SidePort(a))
    reader = framing.FrameReader(r, oob.SidePort(b))
    threads, each = 8, 40
    out: list[Any] = []

    def send(t: int) -> None:
        for i in range(each):
            writer.send(("p", f"{t}", (i, "L" * (oob.LARGE_FRAME + 1) if i % 5 == 0 else "s" * i)))

    senders = [threading.Thread(target=send, args=(t,)) for t in range(threads)]
    for s in senders:
        s.start()
    try:
        while len(out) < threads * each and not reader.eof:
            select.select([r], [], [], 5)
            out.extend(reader.read())
    finally:
        for s in senders:
            s.join(30)
        writer.side.close()
        reader.side.close()  # type: ignore[union-attr]
        os.close(r)
        os.close(w)
    assert reader.damaged is None and len(out) == threads * each
    for t in range(threads):
        mine = [f[2] for f in out if f[1] == f"{t}"]
        assert [i for i, _ in mine] == list(range(each))
        assert all(v == ("L" * (oob.LARGE_FRAME + 1) if i % 5 == 0 else "s" * i) for i, v in mine)


# ----------------------------------------------------------------------------- layering

def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_wire_sits_below_framing_and_the_side_port():
    """No import circle: the wire's lower modules (pipes, frames, markers, ...) import neither framing
    nor oob, and oob does not import framing (anywhere in the file, lazily or under TYPE_CHECKING
    included)."""
    upper = ("toolfork.executor.wire.framing", "toolfork.executor.wire.oob")
    for path in PACKAGE.glob("*.py"):
        if path.name in ("framing.py", "oob.py"):
            continue
        imported = _imports(path)
        assert not {n for n in imported if n.startswith(upper) or n.endswith((".framing", ".oob"))}, path
    assert not {n for n in _imports(PACKAGE / "oob.py") if "framing" in n}
