"""Bounded reading of an open file: no reader holds more than a chunk and one capped line.

A file's size says nothing about the memory a naive reader takes: a 1 GB sparse file costs 12 KB of
disk, and a text head followed by a billion NUL bytes is one line to ``for line in handle``. So
files are read in chunks, lines are cut at a fixed length, a NUL byte met later ends the text (the
file is binary from there on), and every whole-file read is refused above a size the caller names.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator

from .errors import FileSystemError

__all__ = [
    "BINARY_SNIFF",
    "CHUNK",
    "MAX_LINE_BYTES",
    "MAX_LINE_CHARS",
    "clip",
    "human_size",
    "is_binary",
    "lines_of",
    "read_at",
    "read_whole",
    "utf8_boundary",
]

BINARY_SNIFF = 8192
CHUNK = 1 << 16
MAX_LINE_CHARS = 400  # what an output shows of one line
MAX_LINE_BYTES = 1 << 20  # what a search looks at in one piece of a line


def is_binary(head: bytes) -> bool:
    """NUL bytes, or mostly undecodable bytes; a Latin-1 text file with a few accents still counts as text."""
    if b"\x00" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        decoded = head.decode("utf-8", errors="replace")
        return decoded.count("\ufffd") > max(8, len(decoded) // 10)
    return False


def utf8_boundary(chunk: bytes) -> int:
    """Length of ``chunk`` without a trailing partial UTF-8 sequence, so a cut never splits a char."""
    end = len(chunk)
    for back in range(1, min(4, end) + 1):
        byte = chunk[end - back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII)
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 0x6 else 3 if byte >> 4 == 0xE else 4
            return end if back >= need else end - back
    return end


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …[line cut]"


def read_at(fd: int, size: int, offset: int) -> bytes:
    """Up to ``size`` bytes from ``offset`` (fewer only at the end of the file)."""
    parts = []
    while size > 0:
        data = os.pread(fd, min(size, CHUNK * 16), offset)
        if not data:
            break
        parts.append(data)
        size -= len(data)
        offset += len(data)
    return b"".join(parts)


def read_whole(fd: int, size: int, limit: int, what: str) -> bytes:
    """The whole file, refused with an error naming ``what`` when ``fstat``'s size is over ``limit``;
    never more than ``limit`` bytes even if the file grows meanwhile."""
    if size > limit:
        raise FileSystemError(f"{what} is {human_size(size)}; the limit for this is {human_size(limit)}")
    return read_at(fd, limit, 0)


def lines_of(fd: int, max_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline) from the start of the file, in bounded memory.

    A line longer than ``MAX_LINE_BYTES`` comes in pieces of that length under one number (a match
    across a cut is not seen); the text ends at the first NUL byte (binary from there on) or after
    ``max_bytes`` bytes.
    """
    number = 1
    held: list[bytes] = []  # the current line so far, in pieces (joined once, not per chunk)
    held_bytes = 0
    offset = 0
    while max_bytes is None or offset < max_bytes:
        want = CHUNK if max_bytes is None else min(CHUNK, max_bytes - offset)
        chunk = os.pread(fd, want, offset)
        if not chunk:
            break
        offset += len(chunk)
        nul = chunk.find(b"\x00")
        if nul != -1:
            chunk = chunk[:nul]
        start = 0
        while (newline := chunk.find(b"\n", start)) != -1:
            held.append(chunk[start:newline])
            yield number, b"".join(held)
            number += 1
            held, held_bytes = [], 0
            start = newline + 1
        if start < len(chunk):
            held.append(chunk[start:])
            held_bytes += len(chunk) - start
        if held_bytes >= MAX_LINE_BYTES:
            joined = b"".join(held)
            while len(joined) >= MAX_LINE_BYTES:
                yield number, joined[:MAX_LINE_BYTES]
                joined = joined[MAX_LINE_BYTES:]
            held, held_bytes = ([joined] if joined else []), len(joined)
        if nul != -1:
            break
    if held:
        yield number, b"".join(held)
