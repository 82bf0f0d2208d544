"""``LineSource`` on a real pipe: WAIT while the writer is quiet, a wake-up byte when a line arrives
and at the end, lines split across reads, read errors reported, its pipe released on close."""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path

import pytest

from toolfork.commands._input import READ_CHUNK, LineSource, count_lines
from toolfork.executor import WAIT


def _pipe_source() -> tuple[LineSource, int]:
    r, w = os.pipe()
    return LineSource(os.fdopen(r, "rb")), w


def _readable(fd: int | None, timeout: float = 10.0) -> bool:
    assert fd is not None
    return bool(select.select([fd], [], [], timeout)[0])


def _collect(source: LineSource) -> list[object]:
    """Everything the source gives until its end, waiting on ``wakeup_fd`` after a WAIT the way the
    executor does: a WAIT with no wake-up to follow would hang the co-process."""
    got: list[object] = []
    for item in source.items():
        if item is WAIT:
            assert _readable(source.wakeup_fd), "WAIT, and no wake-up followed"
            assert source.wakeup_fd is not None
            os.read(source.wakeup_fd, 4096)
            continue
        got.append(item)
    return got


def test_a_pipe_yields_wait_until_a_line_arrives_and_signals_it() -> None:
    source, w = _pipe_source()
    try:
        assert source.live and source.wakeup_fd is not None
        items = source.items()
        assert next(items) is WAIT  # nothing written yet: the caller must not be blocked
        assert not _readable(source.wakeup_fd, 0)
        os.write(w, b'{"id": 1}\n\n')
        assert _readable(source.wakeup_fd)  # the reader thread queued the line and said so
        assert next(items) == (1, b'{"id": 1}\n')
    finally:
        os.close(w)
        source.close()


def test_every_line_and_the_end_wake_the_consumer() -> None:
    source, w = _pipe_source()
    try:
        def feed() -> None:  # lines one by one, then the end, while the consumer waits on the pipe
            for line in (b"a\n", b"  \n", b"b\n"):
                os.write(w, line)
                time.sleep(0.01)
            os.close(w)

        feeder = threading.Thread(target=feed)
        feeder.start()
        assert _collect(source) == [(1, b"a\n"), (3, b"b\n")]  # blank lines skipped, but counted
        feeder.join()
    finally:
        source.close()


def test_a_regular_file_never_waits(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"one\n\ntwo")
    with open(path, "rb") as f:
        source = LineSource(f)
        assert not source.live and source.wakeup_fd is None
        assert list(source.items()) == [(1, b"one\n"), (3, b"two")]
        source.close()
    assert count_lines(str(path)) == 3


def test_a_read_error_reaches_the_consumer(tmp_path: Path) -> None:
    class Directory:  # not a regular file, so it is read by the thread, and reading it fails (EISDIR)
        def __init__(self) -> None:
            self.fd = os.open(tmp_path, os.O_RDONLY)

        def fileno(self) -> int:
            return self.fd

    stream = Directory()
    try:
        source = LineSource(stream)  # type: ignore[arg-type]
        with pytest.raises(OSError, match=r"reading the input failed: .*Is a directory"):
            _collect(source)
        source.close()
    finally:
        os.close(stream.fd)


def test_lines_split_across_reads_and_a_last_line_without_newline() -> None:
    source, w = _pipe_source()
    try:
        big = b"x" * (3 * READ_CHUNK + 5)
        def feed() -> None:  # more than a pipe holds: written while the reader thread reads
            os.write(w, b"a\nb" + big + b"\nc\n\nlast")
            os.close(w)

        feeder = threading.Thread(target=feed)
        feeder.start()
        got = _collect(source)
        feeder.join()
        assert got == [(1, b"a\n"), (2, b"b" + big + b"\n"), (3, b"c\n"), (5, b"last")]
    finally:
        source.close()


def test_close_releases_the_wakeup_pipe_even_while_the_reader_is_blocked() -> None:
    source, w = _pipe_source()
    wakeup = source.wakeup_fd
    assert wakeup is not None
    source.close()
    with pytest.raises(OSError):
        os.fstat(wakeup)
    source.close()  # twice is fine
    os.write(w, b"late line\n")  # the reader thread gives up on it: nobody reads any more
    os.close(w)
    deadline = time.monotonic() + 10
    while _is_open(source._wake.write_fd):  # ... and then closes the write end it owns
        assert time.monotonic() < deadline, "the reader thread kept its end of the wake-up pipe"
        time.sleep(0.01)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True
