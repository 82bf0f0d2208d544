"""Large frames cross between host and worker in an anonymous memory file, handed over by descriptor.

A frame whose pickle is at least ``LARGE_FRAME`` bytes does not go through the pipe: the sender writes
the pickle into a ``memfd_create`` file, passes the descriptor over the worker's side socket (a unix
``SOCK_SEQPACKET`` pair, ``SCM_RIGHTS``) and then writes a header of length 0 on the pipe, where the
frame would have been. The reader, seeing that header, takes the descriptor from its side socket (it
was sent first, so it is already there), maps the file read-only and unpickles from the mapping: the
bytes are copied once into the objects they rebuild instead of being pushed through a pipe in pieces
and reassembled. A pipe moves about 300 MB/s here with the wake-ups, copies and reassembly; a memory
file moves at memory speed.

Why memfd and not /dev/shm names: a memory file has no name, so nothing can be left behind. The kernel
frees it when the last descriptor to it closes: the sender closes its own as soon as it is sent, the
one in flight in the socket is closed with the socket if the reader dies (crash, timeout, SIGKILL of
the host), and the reader closes it after unpickling.

Memory stays bounded by what is in flight: a worker that has sent a large result waits for the host's
one-byte acknowledgement (sent when the host has taken the descriptor) before it sends another, so each
worker has at most one large result waiting, whatever its chunk of calls. The host sends large
arguments only to idle workers, one frame at a time.

Messages on a side socket: ``b"F"`` + size with one descriptor (a large frame in a file of its own),
``b"P"`` + size with one descriptor (the worker's reusable file, now holding a frame of that size),
``b"R"`` + size (the reusable file again), ``b"A"`` (acknowledgement).

The reader takes back no more than the message declares: a file's ``st_size`` is the sender's to
choose (``ftruncate`` stretches a file to gigabytes without writing a page), so the reader maps exactly
the declared size, refuses a size over its ceiling (``wire.ceiling``) before it maps anything, and
takes only files sealed against shrinking (``F_SEAL_SHRINK``, set by the sender when it makes the file):
a file cut under a mapping would end the reader with SIGBUS.

The reusable file keeps up to ``KEEP_BYTES`` per worker allocated between results: that is the one
exception to "memory is what is in flight", traded for 1 MB results at a third of the cost; it goes
with the worker (its descriptors are closed by the kernel when the worker and the host let go).
"""

from __future__ import annotations

import array
import mmap
import os
import pickle
import socket
import struct
from collections import deque
from typing import Any

from toolfork.executor.wire import ceiling as _ceiling
from toolfork.executor.wire.frames import OOB_HEADER
from toolfork.executor.wire.markers import loads_or_marker
from toolfork.executor.wire.pipes import wait_for, write_all

# At or above this many bytes a frame goes by memory file (measured: below it the pipe is as quick).
LARGE_FRAME = 256 * 1024
# Frames up to this size reuse the worker's memory file (kept, with its pages, for the next one).
KEEP_BYTES = 16 << 20
MIN_MAP = 1 << 20  # the first mapping of a memory file being written; doubled as a frame needs
_MSG_FRAME = b"F"
_MSG_BUF = b"P"
_MSG_REUSE = b"R"
_MSG_ACK = b"A"
_SIZE = struct.Struct("<Q")
# The exact length of each frame message (a stray write on the socket is none of them, by shape).
_MSG_LENGTH = {_MSG_FRAME: 1 + _SIZE.size, _MSG_BUF: 1 + _SIZE.size, _MSG_REUSE: 1 + _SIZE.size}
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)

_HAS_MEMFD = hasattr(os, "memfd_create")
# Large frames go by memory file only where memory files exist (Linux); elsewhere every frame goes
# through the pipe, as before, and the side socket stays unused.
ENABLED = _HAS_MEMFD


def available() -> bool:
    """Memory files exist here (Linux); elsewhere every frame goes through the pipe."""
    return _HAS_MEMFD


def side_socketpair() -> tuple[socket.socket, socket.socket]:
    """A worker's side socket pair: ``SOCK_SEQPACKET`` (message boundaries, and EOF when the other end
    closes), or datagrams where unix sockets have no seqpacket (it is then never used: see ENABLED)."""
    try:
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except (AttributeError, OSError):
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)


class OobError(OSError):
    """A large frame announced on the pipe whose descriptor is not on the side socket, or whose memory
    file is not what its message says (shorter than declared, not sealed against shrinking)."""


class _FileWriter:
    """The minimal file object ``pickle.dump`` writes to, from offset 0 (a reused file is simply
    overwritten): the memory file is mapped and written with plain copies, grown by doubling as the
    frame needs. Big pieces (a large str or bytes) go straight from the object's memory into the
    file, with no copy into a pickle bytes object first; a copy into a mapping costs half a
    ``pwrite`` of the same bytes (measured: 1 MB in 46 us against 98 us)."""

    __slots__ = ("fd", "mm", "size")

    def __init__(self, fd: int, mm: mmap.mmap | None) -> None:
        self.fd = fd
        self.mm = mm
        self.size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        n = len(view)
        end = self.size + n
        mm = self.mm
        if mm is None or end > len(mm):
            mm = self._grow(end)
        mm[self.size:end] = view
        self.size = end
        return n

    def _grow(self, needed: int) -> mmap.mmap:
        capacity = max(needed, 2 * len(self.mm) if self.mm is not None else MIN_MAP)
        if self.mm is not None:
            self.mm.close()
        os.ftruncate(self.fd, capacity)
        self.mm = mmap.mmap(self.fd, capacity, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        return self.mm

    def release(self) -> None:
        """Unmap, for a file handed over alone (the reader maps the size its message declares; the file
        cannot be cut to it: it is sealed against shrinking)."""
        if self.mm is not None:
            self.mm.close()
            self.mm = None


_FD_SPACE = socket.CMSG_SPACE(4 * array.array("i").itemsize)


def _recv(sock: socket.socket, flags: int = 0) -> tuple[bytes, list[int]]:
    """One message and the descriptors that came with it (``socket.recv_fds`` ignores ``flags``).
    Without ``MSG_DONTWAIT`` it waits, even on a socket someone made non-blocking (a tool's library)."""
    while True:
        try:
            data, ancdata, _msg_flags, _addr = sock.recvmsg(64, _FD_SPACE, flags)
            break
        except BlockingIOError:
            if flags & socket.MSG_DONTWAIT:
                raise
            wait_for(sock.fileno(), write=False)
    return data, fds_in(ancdata)


def fds_in(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors an ``SCM_RIGHTS`` message carried (``recvmsg``'s ancillary data), whole ones only."""
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return list(fds)


def _new_file() -> int:
    """A memory file that can grow and never shrink (the reader refuses one that could: see ``_checked``)."""
    import fcntl  # (Linux, as memory files are: not at import, which every platform does)

    fd = os.memfd_create("toolfork-frame", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


def _checked(fd: int, size: int) -> os.stat_result:
    """``fd``'s status, if it can be mapped for ``size`` bytes: sealed against shrinking (so no page of
    the mapping can vanish under the reader) and at least that long; else OobError."""
    import fcntl

    if not fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK:
        raise OobError("a memory file that is not sealed against shrinking")
    st = os.fstat(fd)
    if st.st_size < size:
        raise OobError(f"a memory file of {st.st_size} bytes announced as holding {size}")
    return st


class _Mapped:
    """The host's read-only mapping of a worker's reusable memory file, remapped when it grows."""

    __slots__ = ("fd", "mm")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.mm: mmap.mmap | None = None

    def view(self, size: int) -> memoryview:
        """The first ``size`` bytes (the file is mapped that far, never to its ``st_size``)."""
        if self.mm is None or len(self.mm) < size:
            self.close_map()
            _checked(self.fd, size)
            self.mm = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        return memoryview(self.mm)[:size]

    def same_file(self, st: os.stat_result) -> bool:
        mine = os.fstat(self.fd)
        return (mine.st_ino, mine.st_dev) == (st.st_ino, st.st_dev)

    def close_map(self) -> None:
        if self.mm is not None:
            self.mm.close()
            self.mm = None

    def close(self) -> None:
        self.close_map()
        os.close(self.fd)


class SidePort:
    """One end of a worker's side socket: sends and takes large frames, keeps the in-flight bound.

    A frame up to ``KEEP_BYTES`` goes in the sender's reusable memory file (``b"P"`` hands it over the
    first time and whenever it was replaced, ``b"R" + size`` says "read it again, it holds a new frame"):
    its pages stay allocated and mapped on both sides, so a 1 MB frame costs two plain copies instead
    of allocating, mapping, unmapping and freeing 256 pages. A larger frame gets a memory file of its
    own (``b"F"``), freed as soon as it has been read. Only the worker's results use the reusable file
    (it sends the next one only after the acknowledgement, so the host has finished reading it)."""

    __slots__ = ("_buf", "_mapped", "_sent_buf", "_stash", "awaiting_ack", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.awaiting_ack = False
        self._stash: deque[tuple[bytes, list[int]]] = deque()  # frame messages read while awaiting an ack
        self._buf: _FileWriter | None = None  # sender: the reusable memory file, mapped
        self._sent_buf = False
        self._mapped: _Mapped | None = None  # reader: the peer's reusable memory file, mapped

    # ------------------------------------------------------------------ sending

    def send_payload(self, pipe_fd: int, payload: bytes | memoryview, *, wait_ack: bool) -> None:
        """Send an already pickled frame by memory file, then its header on ``pipe_fd``."""
        self._send(pipe_fd, lambda f: f.write(payload), len(payload), wait_ack)

    def dump(self, pipe_fd: int, obj: Any, *, wait_ack: bool) -> None:
        """Pickle ``obj`` straight into a memory file (no intermediate bytes), then hand it over."""
        self._send(pipe_fd, lambda f: pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL), None, wait_ack)

    def _send(self, pipe_fd: int, fill: Any, size: int | None, wait_ack: bool) -> None:
        if wait_ack and self.awaiting_ack:
            self._wait_ack()
        reuse = wait_ack and (size is None or size <= KEEP_BYTES)
        if reuse:
            if self._buf is None:
                self._buf = _FileWriter(_new_file(), None)
                self._sent_buf = False
            f = self._buf
            f.size = 0
            try:
                fill(f)
            except BaseException:
                self._drop_buf()
                raise
            if f.size > KEEP_BYTES:  # it did not fit the budget: this file goes alone, a new one next time
                self._buf = None
                try:
                    f.release()
                    self._hand_over(_MSG_FRAME + _SIZE.pack(f.size), f.fd, pipe_fd, wait_ack)
                finally:
                    os.close(f.fd)
                return
            if not self._sent_buf:
                self._sent_buf = True
                self._hand_over(_MSG_BUF + _SIZE.pack(f.size), f.fd, pipe_fd, wait_ack)
            else:
                self._hand_over(_MSG_REUSE + _SIZE.pack(f.size), None, pipe_fd, wait_ack)
            return
        f = _FileWriter(_new_file(), None)
        try:
            fill(f)
            f.release()
            self._hand_over(_MSG_FRAME + _SIZE.pack(f.size), f.fd, pipe_fd, wait_ack)
        finally:
            if f.mm is not None:
                f.mm.close()
            os.close(f.fd)

    def _drop_buf(self) -> None:
        if self._buf is not None:
            if self._buf.mm is not None:
                self._buf.mm.close()
            os.close(self._buf.fd)
            self._buf = None

    def _hand_over(self, msg: bytes, fd: int | None, pipe_fd: int, wait_ack: bool) -> None:
        while True:
            try:
                if fd is None:
                    self.sock.send(msg)
                else:
                    socket.send_fds(self.sock, [msg], [fd])
                break
            except BlockingIOError:  # made non-blocking by someone else: wait as a blocking send would
                wait_for(self.sock.fileno(), write=True)
        if wait_ack:
            self.awaiting_ack = True
        write_all(pipe_fd, OOB_HEADER)

    def _wait_ack(self) -> None:
        while self.awaiting_ack:
            message = self._receive(0)
            if message is not None:  # a frame's message came first: kept for take
                self._stash.append(message)

    def _receive(self, flags: int) -> tuple[bytes, list[int]] | None:
        """The next message on the side socket, or None when it was the peer's ack (noted here)."""
        data, fds = _recv(self.sock, flags)
        if not data:
            raise EOFError("the side socket was closed")
        if data == _MSG_ACK and not fds:
            self.awaiting_ack = False
            return None
        return data, list(fds)

    # ------------------------------------------------------------------ receiving

    def take_raw(self, *, block: bool) -> Any:
        """The worker's side: rebuild the next frame, raising if it cannot be (like ``pickle.loads``)."""
        return self.take(block=block, ack=False, strict=True)

    def take(self, *, block: bool, ack: bool, strict: bool = False, loads: Any = None,
             ceiling: int | None = None) -> Any:
        """Rebuild the frame whose message is next on the side socket (a marker if it cannot be,
        unless ``strict``); ``ack`` tells the sender it may send its next large frame. ``loads``: the
        decoder, when it is not pickle (a sandboxed worker's frames: ``wire.dataonly``). A frame
        declared longer than ``ceiling`` bytes is not mapped: it is the ``wire.ceiling`` marker
        (``TooLarge`` raised, if ``strict``)."""
        if loads is None:
            loads = pickle.loads if strict else loads_or_marker
        data, fds = self._next_message(block)
        try:
            kind = data[:1]
            if len(data) != _MSG_LENGTH.get(kind, -1) or len(fds) != (kind != _MSG_REUSE):
                raise OobError(f"unexpected message {data[:16]!r} with {len(fds)} descriptors on the side socket")
            (size,) = _SIZE.unpack_from(data, 1)
            if kind != _MSG_FRAME and size > KEEP_BYTES:
                raise OobError(f"a reusable memory file announced as holding {size} bytes, over {KEEP_BYTES}")
            if ceiling is not None and size > ceiling:
                too_large = _ceiling.TooLarge(f"a frame of {size / _ceiling.MB:.0f} MB", ceiling)
                if strict:
                    raise too_large
                if kind == _MSG_BUF:  # the reusable file is still the sender's next one: keep it
                    self._keep(fds.pop(0))
                return _ceiling.marker(too_large)
            if kind == _MSG_FRAME:
                st = _checked(fds[0], size)
                if self._mapped is not None and self._mapped.same_file(st):
                    # The sender's reusable file outgrew the budget and came alone: it is not reused
                    # again, so let go of it here too, or its pages would outlive this frame.
                    self._mapped.close()
                    self._mapped = None
                if size == 0:
                    return loads(b"")
                with mmap.mmap(fds[0], size, mmap.MAP_SHARED | _POPULATE, mmap.PROT_READ) as mm:  # not st_size
                    whole = memoryview(mm)
                    try:
                        return loads(whole)
                    finally:
                        whole.release()
            if kind == _MSG_BUF:
                self._keep(fds.pop(0))
            elif self._mapped is None:
                raise OobError("a reused memory file was announced before any was handed over")
            assert self._mapped is not None
            view = self._mapped.view(size)
            try:
                return loads(view)
            finally:
                view.release()
        finally:
            for fd in fds:
                os.close(fd)
            if ack:
                try:
                    self.sock.send(_MSG_ACK, socket.MSG_DONTWAIT)
                except OSError:
                    pass

    def _keep(self, fd: int) -> None:
        """``fd`` is the sender's reusable memory file from now on."""
        if self._mapped is not None:
            self._mapped.close()
        self._mapped = _Mapped(fd)

    def _next_message(self, block: bool) -> tuple[bytes, list[int]]:
        if self._stash:
            return self._stash.popleft()
        flags = 0 if block else socket.MSG_DONTWAIT
        while True:
            try:
                message = self._receive(flags)
            except BlockingIOError:
                raise OobError("a large frame was announced but its message is not on the side socket") from None
            if message is not None:
                return message

    def close(self) -> None:
        while self._stash:
            for fd in self._stash.popleft()[1]:
                os.close(fd)
        self._drop_buf()
        if self._mapped is not None:
            self._mapped.close()
            self._mapped = None
        self.sock.close()


__all__ = ["LARGE_FRAME", "OOB_HEADER", "OobError", "SidePort", "available"]
