"""The background writer of ``toolfork run``'s output: every line, whole and in order, and a write
error reaches the job (raised by flush and the next write, announced through ``on_error``)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from toolfork.commands._output import MAX_PENDING_LINES, OutFile


def test_lines_come_out_whole_and_in_order(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    out = OutFile.open(str(path), append=False, background=True)
    n = 3 * MAX_PENDING_LINES  # past the bound: the caller waits for the writer now and then
    for i in range(n):
        out.write({"id": f"c{i}", "status": "ok", "text": "é" * (i % 50)})
    out.flush()
    out.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == n + 1
    assert [json.loads(line)["id"] for line in lines[:-1]] == [f"c{i}" for i in range(n)]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_failed_write_reaches_the_job() -> None:
    out = OutFile.open("/dev/full", append=True, background=True)
    told = threading.Event()
    out.on_error = told.set
    try:
        out.write({"id": "a", "status": "ok"})
        assert told.wait(10.0)
        assert isinstance(out.error, OSError)
        with pytest.raises(OSError):
            out.flush()
        with pytest.raises(OSError):
            out.write({"id": "b", "status": "ok"})
    finally:
        out.close()
