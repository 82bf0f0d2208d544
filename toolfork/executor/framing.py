"""Length-prefixed pickle frames on raw pipe file descriptors.

The hot path of the fork pool is: host writes a frame of calls, a worker writes one frame per
result. Frames are ``4-byte little-endian length + pickle`` written with ``os.write`` on blocking
pipes (worker side) and read with non-blocking ``os.read`` into a per-pipe buffer (host side), so the
host never blocks on one worker while another has a result ready, and a frame larger than one read is
assembled into a preallocated buffer without being copied more than once.

A frame that arrives whole but cannot be unpickled in the host (a value that pickled in the worker and
raises while it is rebuilt: an exception class whose ``__init__`` takes other arguments than its
``args``, a ``__setstate__`` that fails, a class the host cannot import) does not stop the reader:
``FrameReader.read`` returns the marker ``("!", exception type name, message)`` in that frame's place
and goes on with the frames after it. The message names the type that could not be rebuilt when it
can be found. The caller turns the marker into an error for the call the frame belonged to.

Large frames (``oob.LARGE_FRAME`` bytes and up) do not go through the pipe: a header of length 0 says
the frame is in a memory file whose descriptor waits on the worker's side socket (see ``oob``).
"""

from __future__ import annotations

import os
import pickle
import pickletools
import re
import struct
from typing import TYPE_CHECKING, Any

from toolfork.executor import oob

if TYPE_CHECKING:
    from toolfork.executor.oob import SidePort

HEADER = struct.Struct("<I")
HEADER_SIZE = HEADER.size
MAX_FRAME = 0xFFFF_FFFF  # 4 GiB minus one: larger payloads are refused with a clear error
# Bytes asked for per read of a result pipe. Measured (bench/results/throughput.md): 64 KiB reads are
# cheaper than 1 MiB reads for the small frames of the hot path (a 1 MiB read allocates and frees a
# 1 MiB buffer each time), and large frames no longer come through the pipe.
READ_CHUNK = 1 << 16


# The marker returned in place of a frame that could not be unpickled: ("!", type name, message).
BAD_FRAME = "!"
# A failed frame is scanned for the classes it refers to (to name the one that failed) up to this size.
_SCAN_LIMIT = 16 << 20


class FrameTooLarge(ValueError):
    pass


def loads_or_marker(data: bytes | bytearray | memoryview) -> Any:
    """``pickle.loads(data)``, or the marker ``("!", type name, message)`` if that raises.

    Unpickling runs code from the other side (constructors, ``__setstate__``, ``__reduce__``
    callables), so anything it raises short of KeyboardInterrupt is caught, ``SystemExit`` included:
    a value must not be able to end the host by being rebuilt."""
    try:
        return pickle.loads(data)
    except (Exception, SystemExit, GeneratorExit) as exc:
        return bad_frame_marker(data, exc)


def bad_frame_marker(data: bytes | bytearray | memoryview, exc: BaseException) -> tuple[str, str, str]:
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    culprit = _culprit(data, text)
    what = f"a value of type {culprit}" if culprit else "a value"
    message = f"{what} sent by the worker could not be rebuilt in the host: {type(exc).__name__}: {text}"
    return (BAD_FRAME, type(exc).__name__, message)


_NAMED = re.compile(r"([A-Za-z_][\w.]*?)(?:\.__init__|\.__new__|\.__setstate__|\.__reduce__)?\(\)")


def _culprit(data: bytes | bytearray | memoryview, text: str) -> str | None:
    """The ``module.qualname`` of the class the failure is about: a class the frame refers to whose
    name the exception text mentions (``E.__init__() missing 1 required positional argument``), else
    the last class of the frame outside the standard containers; None when nothing is found."""
    classes = _classes_in(data)
    mentioned = {m.group(1) for m in _NAMED.finditer(text)}
    mentioned |= set(re.findall(r"'([A-Za-z_][\w.]*)'", text))  # e.g. Can't get attribute 'E' on <module>
    for module, qualname in reversed(classes):
        if qualname in mentioned or qualname.rsplit(".", 1)[-1] in mentioned:
            return f"{module}.{qualname}"
    for module, qualname in reversed(classes):
        if module not in ("builtins", "copyreg", "collections", "_codecs") and not module.startswith("toolfork."):
            return f"{module}.{qualname}"
    return None


def _classes_in(data: bytes | bytearray | memoryview) -> list[tuple[str, str]]:
    """(module, qualname) of every global a pickle refers to, in order; [] if it cannot be scanned."""
    if len(data) > _SCAN_LIMIT:
        return []
    found: list[tuple[str, str]] = []
    strings: list[str] = []  # strings pushed so far (their order is what STACK_GLOBAL needs)
    memo: dict[int, str | None] = {}
    last: str | None = None  # the string on top of the stack, if the last push was one
    try:
        for op, arg, _pos in pickletools.genops(bytes(data)):
            name = op.name
            if name in ("GLOBAL", "INST"):
                module, _, qualname = str(arg).partition(" ")
                found.append((module, qualname))
                last = None
            elif name == "STACK_GLOBAL":
                if len(strings) >= 2:
                    found.append((strings[-2], strings[-1]))
                last = None
            elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                last = str(arg)
                strings.append(last)
            elif name == "MEMOIZE":
                memo[len(memo)] = last
            elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[int(arg or 0)] = last
            elif name in ("BINGET", "LONG_BINGET", "GET"):
                last = memo.get(int(arg or 0))
                if last is not None:
                    strings.append(last)
            elif name != "FRAME":
                last = None
    except Exception:  # a truncated or odd pickle: keep what was found
        pass
    return found


def frame(payload: bytes) -> bytes:
    """Header and pickle: one frame for the pipe; raises FrameTooLarge without side effects."""
    if len(payload) > MAX_FRAME:
        raise FrameTooLarge(f"a frame of {len(payload)} bytes exceeds the {MAX_FRAME}-byte limit")
    return HEADER.pack(len(payload)) + payload


def encode(obj: Any) -> bytes:
    """Pickle ``obj`` into one frame; raises (pickling errors, FrameTooLarge) without side effects."""
    return frame(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte to a blocking fd (os.write may write less than asked on a pipe)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, obj: Any, side: SidePort | None = None, *, wait_ack: bool = False) -> None:
    """Send one frame: through the pipe, or by memory file over ``side`` when it is large."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    if side is not None and oob.ENABLED and len(payload) >= oob.LARGE_FRAME:
        side.send_payload(fd, payload, wait_ack=wait_ack)
        return
    write_all(fd, frame(payload))


def recv_blocking(fd: int, side: SidePort | None = None) -> Any:
    """Read exactly one frame from a blocking fd; raises EOFError when the writer is gone."""
    header = _read_exact(fd, HEADER_SIZE)
    (length,) = HEADER.unpack(header)
    if length == 0 and side is not None:
        return side.take_raw(block=True)
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
    writer closed its end (the worker died or exited). It never raises for a frame that cannot be
    unpickled: such a frame is returned as the marker ``("!", type name, message)`` in its place.
    """

    __slots__ = ("_body", "_filled", "_head", "eof", "fd", "side")

    def __init__(self, fd: int, side: SidePort | None = None) -> None:
        self.fd = fd
        self.side = side  # where large frames' descriptors arrive (a header of length 0 announces one)
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
                out.append(loads_or_marker(self._body))
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
        loads = loads_or_marker
        unpack = HEADER.unpack_from
        while end - pos >= HEADER_SIZE:
            (length,) = unpack(data, pos)
            start = pos + HEADER_SIZE
            if length == 0:
                out.append(self._take_oob())
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

    def _take_oob(self) -> Any:
        if self.side is None:
            return (BAD_FRAME, "OobError", "a large frame was announced on a pipe without a side socket")
        try:
            return self.side.take(block=False, ack=True)
        except (OSError, EOFError) as exc:
            return (BAD_FRAME, type(exc).__name__, f"a large frame could not be received: {exc}")

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


__all__ = ["BAD_FRAME", "FrameReader", "FrameTooLarge", "bad_frame_marker", "encode", "loads_or_marker",
           "recv_blocking", "send", "write_all"]
