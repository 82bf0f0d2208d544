"""toolkits/fs/reading: lines in bounded pieces, NUL ends the text, whole reads refused above a size."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolfork.toolkits.fs.errors import FileSystemError
from toolfork.toolkits.fs.reading import MAX_LINE_BYTES, lines_of, read_whole


def _lines(path: Path, data: bytes, max_bytes: int | None = None) -> list[tuple[int, bytes]]:
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(lines_of(fd, max_bytes))
    finally:
        os.close(fd)


def test_lines_like_a_text_file(tmp_path: Path) -> None:
    assert _lines(tmp_path / "f", b"a\r\nbb\n\nlast") == [(1, b"a\r"), (2, b"bb"), (3, b""), (4, b"last")]
    assert _lines(tmp_path / "f", b"") == []
    assert _lines(tmp_path / "f", b"x\n" * 100_000)[-1] == (100_000, b"x")


def test_a_very_long_line_comes_in_pieces_under_one_number(tmp_path: Path) -> None:
    got = _lines(tmp_path / "f", b"y" * (MAX_LINE_BYTES * 2 + 5) + b"\nz\n")
    assert [(n, len(piece)) for n, piece in got] == [(1, MAX_LINE_BYTES), (1, MAX_LINE_BYTES), (1, 5), (2, 1)]


def test_text_ends_at_a_nul_byte_and_at_max_bytes(tmp_path: Path) -> None:
    assert _lines(tmp_path / "f", b"one\ntwo\x00three\nfour\n") == [(1, b"one"), (2, b"two")]
    assert _lines(tmp_path / "f", b"one\ntwo\nthree\n", max_bytes=6) == [(1, b"one"), (2, b"tw")]


def test_read_whole_refuses_above_the_limit_and_never_reads_past_it(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(FileSystemError, match="'f' is 10 B; the limit for this is 9 B"):
            read_whole(fd, 10, 9, "'f'")
        assert read_whole(fd, 5, 9, "'f'") == b"012345678"  # the file grew after fstat: still bounded
    finally:
        os.close(fd)
