"""Frames on raw pipe file descriptors: the reader of the host, the writer of a worker.

The hot path of the fork pool is: host writes a frame of calls, a worker writes one frame per
result. A frame is ``header + pickle`` (see ``wire.frames``) written with ``os.write`` on blocking
pipes (worker side) and read with non-blocking ``os.read`` into a per-pipe buffer (host side), so the
host never blocks on one worker while another has a result ready, and a frame larger than one read is
assembled into a preallocated buffer without being copied more than once.

A frame that arrives whole but cannot be unpickled in the host does not stop the reader:
``FrameReader.read`` returns the marker ``("!", exception type name, message)`` in that frame's place
(see ``wire.markers``) and goes on with the frames after it.

Bytes that are not a frame (a header without the tag, a length over the pipe's bound, a large frame
announced whose memory file is not on the side socket) are another matter: after them nothing on that
pipe can be trusted, so the reader stops, sets ``eof`` and says why in ``damaged``; the pool fails the
call the worker was running and replaces the worker. The reader never waits for more than the bound.

Large frames (``oob.LARGE_FRAME`` bytes and up) do not go through the pipe: a header of length 0 says
the frame is in a memory file whose descriptor waits on the worker's side socket (see ``oob``). So a
result pipe with a side socket carries no frame of ``LARGE_FRAME`` bytes or more, and that is its bound.

A worker that runs a sandboxed call encodes its frames as data (``wire.dataonly``, msgpack) from then
on, and the host reads that worker's pipe and side socket with the data-only decoder: nothing a
sandboxed call sends is ever unpickled here (``FrameReader.use_data_only``). Warm workers keep pickle.
What a frame rebuilds into is bounded by ``FrameReader.ceiling``, its running calls' (``wire.ceiling``).

A worker's ``FrameWriter`` holds one lock around every frame it sends (pipe and side socket alike):
a tool's threads may call ``emit_progress`` while the worker sends a result, and each frame still goes
out whole.
"""

from __future__ import annotations

import os
import pickle
import select
import sys
import threading
from collections.abc import Callable
from typing import Any

from toolfork.executor.wire import ceiling, dataonly, oob
from toolfork.executor.wire.frames import (
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MAX_FRAME,
    ChannelDamaged,
    FrameTooLarge,
    check_header,
    frame,
)
from toolfork.executor.wire.markers import BAD_FRAME, bad_frame_marker, loads_or_marker
from toolfork.executor.wire.pipes import SPIN_S, look_briefly, read_some, write_all

# Bytes asked for per read of a result pipe. Measured (bench/results/throughput.md): 64 KiB reads are
# cheaper than 1 MiB reads for the small frames of the hot path (a 1 MiB read allocates and frees a
# 1 MiB buffer each time), and large frames no longer come through the pipe.
READ_CHUNK = 1 << 16
_HIGHEST = pickle.HIGHEST_PROTOCOL


def encode(obj: Any) -> bytes:
    """Pickle ``obj`` into one frame; raises (pickling errors, FrameTooLarge) without side effects."""
    return frame(pickle.dumps(obj, protocol=_HIGHEST))


def send(fd: int, obj: Any, side: oob.SidePort | None = None, *, wait_ack: bool = False) -> None:
    """Send one frame: through the pipe, or by memory file over ``side`` when it is large."""
    payload = pickle.dumps(obj, protocol=_HIGHEST)
    if side is not None and oob.ENABLED and len(payload) >= oob.LARGE_FRAME:
        side.send_payload(fd, payload, wait_ack=wait_ack)
        return
    write_all(fd, frame(payload))


def recv_blocking(fd: int, side: oob.SidePort | None = None, lock: Any = None) -> Any:
    """Read exactly one frame from a blocking fd; raises EOFError when the writer is gone and
    ChannelDamaged for bytes that are not a frame. ``lock`` is held while a large frame is taken from
    ``side`` (the writer's lock: its threads use that socket too)."""
    tag, length = HEADER.unpack(_read_exact(fd, HEADER_SIZE))
    check_header(tag, length, MAX_FRAME)
    if length == 0 and side is not None:
        if lock is None:
            return side.take_raw(block=True)
        with lock:
            return side.take_raw(block=True)
    return pickle.loads(_read_exact(fd, length))


class CallReader:
    """A worker's reading half: the frames on its blocking call pipe. With ``ahead`` one read takes what
    the pipe holds (nearly always one whole frame, header and body: one system call where exact reads
    take two), and what it took past that frame is kept for the next; before a read that would sleep it
    looks at the pipe for ``SPIN_S`` (the next frame of a batch comes within microseconds, and waking a
    sleeping worker costs the host more than a quick call). Without ``ahead`` every frame is read
    exactly (``recv_blocking``): a session's process forks its checkpoint between frames, and a copy
    must not hold bytes of a frame its original already took."""

    __slots__ = ("_buf", "_poller", "_pos", "ahead", "fd", "lock", "side", "spin_s")

    def __init__(self, fd: int, side: oob.SidePort | None, lock: Any, *, ahead: bool) -> None:
        self.fd, self.side, self.lock, self.ahead = fd, side, lock, ahead
        self._buf: bytes | bytearray = b""  # what was read and not yet taken: from ``_pos`` on
        self._pos = 0
        self._poller = select.poll()  # looked at for ``SPIN_S`` before a read that would sleep
        self._poller.register(fd, select.POLLIN)
        self.spin_s = SPIN_S  # the worker sets it frame by frame (0: sleep at once)

    def recv(self) -> Any:
        """One frame, as ``recv_blocking``: EOFError when the host is gone, ChannelDamaged for bytes
        that are not a frame."""
        if not self.ahead:
            return recv_blocking(self.fd, self.side, self.lock)
        buf, pos = self._buf, self._pos
        if len(buf) - pos < HEADER_SIZE:
            buf, pos = self._more(buf, pos, HEADER_SIZE)
        tag, length = HEADER.unpack_from(buf, pos)
        check_header(tag, length, MAX_FRAME)
        if len(buf) - pos < HEADER_SIZE + length:
            buf, pos = self._more(buf, pos, HEADER_SIZE + length)
        start = pos + HEADER_SIZE
        end = start + length
        if end == len(buf):
            self._buf, self._pos = b"", 0
        else:
            self._buf, self._pos = buf, end
        if length == 0 and self.side is not None:
            with self.lock:
                return self.side.take_raw(block=True)
        return pickle.loads(buf[start:end])

    def _more(self, buf: bytes | bytearray, pos: int, n: int) -> tuple[bytes | bytearray, int]:
        """What is left of ``buf`` from ``pos`` and what the pipe holds: at least ``n`` bytes (waits for
        them), from offset 0."""
        left = len(buf) - pos
        if not left and self.spin_s:  # the next frame may come within microseconds: looked for first
            look_briefly(self._poller.poll, self.spin_s)
        got = read_some(self.fd, max(n - left, READ_CHUNK))
        if not got:
            raise EOFError
        if not left and len(got) >= n:
            return got, 0
        acc = bytearray(buf[pos:])
        acc += got
        while len(acc) < n:
            got = read_some(self.fd, max(n - len(acc), READ_CHUNK))
            if not got:
                raise EOFError
            acc += got
        return acc, 0


def _read_exact(fd: int, n: int) -> bytes | bytearray:
    if n == 0:
        return b""
    first = read_some(fd, n)
    if not first:
        raise EOFError
    if len(first) == n:
        return first
    buf = bytearray(first)
    while len(buf) < n:
        chunk = read_some(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _pickled(obj: Any) -> bytes:
    return pickle.dumps(obj, _HIGHEST)


class FrameWriter:
    """A worker's sending half: its result pipe and side socket, behind one lock, so a frame goes out
    whole whatever thread sends it; a payload of ``oob.LARGE_FRAME`` bytes or more goes by memory file
    (results and progress alike), the rest through the pipe. ``encode`` is pickle until the worker runs
    a sandboxed call (``use_data_only``): from then on every frame it sends is data-only."""

    __slots__ = ("data_only", "encode", "fd", "large", "lock", "side")

    def __init__(self, fd: int, side: oob.SidePort) -> None:
        self.fd = fd
        self.side = side
        self.large = oob.LARGE_FRAME if oob.ENABLED else sys.maxsize  # no memory files here: every frame by pipe
        self.lock = threading.RLock()  # a value's __reduce__ may emit progress while it is pickled
        self.encode: Callable[[Any], bytes] = _pickled
        self.data_only = False

    def use_data_only(self) -> None:
        """From now on, for good, frames are encoded by ``wire.dataonly`` (the host decodes this worker's
        frames so: it was forked for a sandboxed call)."""
        self.encode = dataonly.encode
        self.data_only = True

    def decode(self, payload: bytes) -> Any:
        """What the host will rebuild from ``payload`` (raises where the host could not)."""
        return dataonly.decode(payload) if self.data_only else pickle.loads(payload)

    def send(self, obj: Any) -> None:
        """Encode ``obj`` and send it; raises what encoding raises, with nothing sent."""
        self.send_payload(self.encode(obj))

    def send_payload(self, payload: bytes) -> None:
        with self.lock:
            n = len(payload)
            if n >= self.large:
                self.side.send_payload(self.fd, payload, wait_ack=True)
            elif n <= MAX_FRAME:  # ``frame`` spelled out, one call less per result
                write_all(self.fd, HEADER.pack(MAGIC, n) + payload)
            else:
                write_all(self.fd, frame(payload))  # raises FrameTooLarge

    def dump(self, obj: Any) -> None:
        """Pickle ``obj`` straight into a memory file (no intermediate bytes) and send it."""
        if self.data_only:
            self.send_payload(self.encode(obj))
            return
        with self.lock:
            self.side.dump(self.fd, obj, wait_ack=True)


class FrameReader:
    """Accumulates bytes from one non-blocking fd and yields the complete frames.

    ``read()`` returns the list of objects decoded from what was available, and sets ``eof`` when the
    writer closed its end (the worker died or exited) or when bytes that are not a frame arrived (then
    ``damaged`` says what was wrong). It never raises for a frame that cannot be unpickled: such a
    frame is returned as the marker ``("!", type name, message)`` in its place.
    """

    __slots__ = ("_body", "_filled", "_head", "ceiling", "damaged", "eof", "fd", "loads", "max_frame", "side")

    def __init__(self, fd: int, side: oob.SidePort | None = None) -> None:
        self.fd = fd
        self.loads: Callable[[Any], Any] = loads_or_marker  # ``use_data_only``: never unpickle this pipe
        self.side = side  # where large frames' descriptors arrive (a header of length 0 announces one)
        self.ceiling = ceiling.DEFAULT  # bytes a frame may rebuild into: its calls' (set as they are sent)
        # A sender with a side socket sends no frame of LARGE_FRAME bytes or more by pipe (see send).
        self.max_frame = oob.LARGE_FRAME if side is not None and oob.ENABLED else MAX_FRAME
        self._head = b""  # bytes not yet parsed (small frames, partial headers)
        self._body: bytearray | None = None  # preallocated buffer of a large frame being filled
        self._filled = 0
        self.eof = False
        self.damaged: str | None = None

    def use_data_only(self) -> None:
        """Decode every frame of this pipe (and its side socket) as data (``wire.dataonly``), never by
        unpickling: the worker on the other end runs a sandboxed call. Called before it is sent one."""
        self.loads = self._decode_data

    def _decode_data(self, data: bytes | bytearray | memoryview) -> Any:
        return dataonly.decode_or_marker(data, self.ceiling)

    def read(self) -> list[Any]:
        out: list[Any] = []
        while not self.eof:
            if self._body is not None:
                if not self._fill_body():
                    return out
                out.append(self.loads(self._body))
                self._body = None
                continue
            try:
                chunk = os.read(self.fd, READ_CHUNK)
            except BlockingIOError:
                return out
            except OSError:
                self.eof = True
                return out
            if not chunk:
                self.eof = True
                return out
            data = self._head + chunk if self._head else chunk
            self._head = self._parse(data, out)
            if len(chunk) < READ_CHUNK and self._body is None:
                return out
        return out

    def _parse(self, data: bytes, out: list[Any]) -> bytes:
        pos = 0
        end = len(data)
        loads = self.loads
        unpack = HEADER.unpack_from
        bound = self.max_frame
        while end - pos >= HEADER_SIZE:
            tag, length = unpack(data, pos)
            if tag != MAGIC or length > bound:
                try:
                    check_header(tag, length, bound)
                except ChannelDamaged as exc:
                    self.refuse(str(exc))
                return b""
            start = pos + HEADER_SIZE
            if length == 0:
                taken = self._take_oob()
                if self.eof:
                    return b""
                out.append(taken)
                pos = start
                continue
            if end - start >= length:
                out.append(loads(memoryview(data)[start : start + length]))
                pos = start + length
                continue
            # A frame larger than what we have: preallocate it and fill it with readinto.
            self._body = bytearray(length)
            have = end - start
            self._body[:have] = memoryview(data)[start:end]
            self._filled = have
            return b""
        return data[pos:]

    def refuse(self, reason: str) -> None:
        """Nothing more is read from this pipe: what came is damage (``reason``), as at bytes that are not a frame."""
        self.damaged = reason
        self.eof = True
        self._body = None

    def _take_oob(self) -> Any:
        if self.side is None:
            self.refuse("a large frame announced on a pipe without a side socket")
            return None
        try:
            return self.side.take(block=False, ack=True, loads=self.loads, ceiling=self.ceiling)
        except (OSError, EOFError) as exc:  # OobError included: the side socket is out of step
            self.refuse(f"a large frame that could not be received ({type(exc).__name__}: {exc})")
            return None

    def _fill_body(self) -> bool:
        assert self._body is not None
        view = memoryview(self._body)
        while self._filled < len(self._body):
            try:
                n = os.readv(self.fd, [view[self._filled :]])
            except BlockingIOError:
                return False
            except OSError:
                self.eof = True
                return False
            if n == 0:
                self.eof = True
                return False
            self._filled += n
        return True


__all__ = ["BAD_FRAME", "HEADER_SIZE", "READ_CHUNK", "FrameReader", "FrameTooLarge", "FrameWriter",
           "bad_frame_marker", "encode", "loads_or_marker", "recv_blocking", "send", "write_all"]
