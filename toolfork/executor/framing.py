"""Length-prefixed pickle frames on raw pipe file descriptors.

The hot path of the fork pool is: host writes a frame of calls, a worker writes one frame per
result. Frames are ``4-byte little-endian length + pickle`` written with ``os.write`` on blocking
pipes (worker side) and read with non-blocking ``os.read`` into a per-pipe buffer (host side), so the
host never blocks on one worker while another has a result ready, and a 100 MB result is assembled
from many reads without being copied more than once.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

_HEADER = struct.Struct("<I")
HEADER_SIZE = _HEADER.size
MAX_FRAME = 0xFFFF_FFFF  # 4 GiB minus one: larger payloads are refused with a clear error
READ_CHUNK = 1 << 20


class FrameTooLarge(ValueError):
    pass


def encode(obj: Any) -> bytes:
    """Pickle ``obj`` into one frame; raises (pickling errors, FrameTooLarge) without side effects."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    if len(payload) > MAX_FRAME:
        raise FrameTooLarge(f"a frame of {len(payload)} bytes exceeds the {MAX_FRAME}-byte limit")
    return _HEADER.pack(len(payload)) + payload


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte to a blocking fd (os.write may write less than asked on a pipe)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, obj: Any) -> None:
    write_all(fd, encode(obj))


def recv_blocking(fd: int) -> Any:
    """Read exactly one frame from a blocking fd; raises EOFError when the writer is gone."""
    header = _read_exact(fd, HEADER_SIZE)
    (length,) = _HEADER.unpack(header)
    return pickle.loads(_read_exact(fd, length))


def _read_exact(fd: int, n: int) -> bytes | bytearray:
    if n == 0:
        return b""
    first = os.read(fd, n)
    if not first:
        raise EOFError
    if len(first) == n:
        return first
    buf = bytearray(first)
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


class FrameReader:
    """Accumulates bytes from one non-blocking fd and yields the complete frames.

    ``read()`` returns the list of objects decoded from what was available, and sets ``eof`` when the
    writer closed its end (the worker died or exited).
    """

    __slots__ = ("_body", "_filled", "_head", "eof", "fd")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._head = b""  # bytes not yet parsed (small frames, partial headers)
        self._body: bytearray | None = None  # preallocated buffer of a large frame being filled
        self._filled = 0
        self.eof = False

    def read(self) -> list[Any]:
        out: list[Any] = []
        while True:
            if self._body is not None:
                if not self._fill_body():
                    return out
                out.append(pickle.loads(self._body))
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

    def _parse(self, data: bytes, out: list[Any]) -> bytes:
        pos = 0
        end = len(data)
        loads = pickle.loads
        unpack = _HEADER.unpack_from
        while end - pos >= HEADER_SIZE:
            (length,) = unpack(data, pos)
            start = pos + HEADER_SIZE
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


__all__ = ["FrameReader", "FrameTooLarge", "encode", "recv_blocking", "send", "write_all"]
