"""Red team, ``toolfork run`` and ``toolfork worker``: pathological input lines (#5) and output that
must stay valid UTF-8 JSON (#6), through the real command in a subprocess."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import HOSTILE, line, records, toolfork
from toolfork.commands import _input
from toolfork.commands._input import LongLine, read_call

DEEP = b'{"id": "deep", "name": "echo", "arguments": ' + b"[" * 1000 + b"]" * 1000 + b"}\n"

# (input line, expected id of its record, a piece of its error message)
PATHOLOGICAL: list[tuple[bytes, str, str]] = [
    (DEEP, "line-2", "nested too deeply"),
    (b'{"id": "d2", "name": "echo", "arguments": {"text": ' + b"[" * 300 + b"]" * 300 + b"}}\n", "d2",
     "nested more than 128 levels"),
    (b'{"id": "d3", "type": "function", "function": {"name": "echo", "arguments": "{\\"text\\": '
     + b"[" * 1000 + b"]" * 1000 + b'}"}}\n', "line-4", "nested too deeply"),
    (b'{"id": "inf", "name": "echo", "arguments": {"text": 1e999999}}\n', "inf", "out of the range"),
    (b'{"id": "nan", "name": "echo", "arguments": {"text": [1, NaN]}}\n', "nan", "NaN"),
    (b'{"id": "big", "name": "echo", "arguments": {"text": ' + b"7" * 5000 + b"}}\n", "line-7",
     "integer string conversion"),
    (b'{"id": "bad\xff\xfe", "name": "echo", "arguments": {}}\n', "line-8", "utf-8"),
    (b'{"id": "nul", "name": "echo", "arguments": {"text": "a\x00b"}}\n', "line-9", "control character"),
    (b"\x00\x00\x00\n", "line-10", "not valid JSON"),
    (b"\xef\xbb\xbf{}\n", "line-11", "\"name\" missing"),  # a BOM is accepted; the call is empty
]


def _input_bytes() -> bytes:
    return (line({"id": "first", "name": "echo", "arguments": {"text": "a"}})
            + b"".join(raw for raw, _, _ in PATHOLOGICAL)
            + line({"id": "last", "name": "echo", "arguments": {"text": "z"}}))


def _check(out: list[dict[str, Any]], *, in_order: bool) -> None:
    if not in_order:
        out = sorted(out, key=lambda r: ["first", *(i for _, i, _ in PATHOLOGICAL), "last"].index(r["id"]))
    assert [r["id"] for r in out] == ["first", *(i for _, i, _ in PATHOLOGICAL), "last"]
    assert out[0]["status"] == out[-1]["status"] == "ok"
    for record, (_, _, said) in zip(out[1:-1], PATHOLOGICAL, strict=True):
        assert record["status"] == "error" and record["error"]["type"] == "MalformedCallError", record
        assert said.lower() in record["error"]["message"].lower(), record


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_run_answers_every_pathological_line_and_goes_on(mode: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(_input_bytes())
    proc = toolfork("run", str(calls), "--tools", HOSTILE, "--mode", mode, "-q")
    assert proc.returncode == 1, proc.stderr  # some calls failed; no traceback, no exit 1 from a crash
    assert b"Traceback" not in proc.stderr
    _check(records(proc.stdout), in_order=True)


def test_run_from_a_pipe_and_worker_answer_every_pathological_line() -> None:
    run = toolfork("run", "-", "-o", "-", "--tools", HOSTILE, "-q", stdin=_input_bytes())
    assert run.returncode == 1 and b"Traceback" not in run.stderr, run.stderr
    _check(records(run.stdout), in_order=True)
    worker = toolfork("worker", "--tools", HOSTILE, stdin=_input_bytes())
    assert worker.returncode == 0 and b"Traceback" not in worker.stderr, worker.stderr
    _check(records(worker.stdout), in_order=False)


def test_a_50_mb_line_is_a_call_like_any_other_and_garbage_of_that_size_an_error(tmp_path: Path) -> None:
    text = "y" * (50 << 20)
    calls = tmp_path / "calls.jsonl"
    with open(calls, "wb") as f:
        f.write(line({"id": "huge", "name": "size", "arguments": {"text": text}}))
        f.write(b"{" + b"x" * (50 << 20) + b"\n")
        f.write(line({"id": "after", "name": "size", "arguments": {"text": "abc"}}))
    proc = toolfork("run", str(calls), "--tools", HOSTILE, "-q")
    out = records(proc.stdout)
    assert [r["id"] for r in out] == ["huge", "line-2", "after"], proc.stderr
    assert out[0]["output"]["data"] == len(text) and out[2]["output"]["data"] == 3
    assert out[1]["error"]["type"] == "MalformedCallError"


@pytest.mark.parametrize("source", ["file", "pipe"])
def test_a_line_over_the_limit_is_skipped_without_being_kept(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_input, "READ_CHUNK", 7)  # lines cross many reads
    data = b'{"id": 1}\n' + b"z" * 100 + b"\n" + b"q" * 30 + b'\n{"id": 2}\n' + b"w" * 45
    if source == "file":
        got = list(_input._file_lines(io.BytesIO(data), limit=40))
    else:
        r, w = os.pipe()
        os.write(w, data)
        os.close(w)
        try:
            got = list(_input._lines_of(r, limit=40))
        finally:
            os.close(r)
    assert got == [b'{"id": 1}\n', LongLine(101), b"q" * 30 + b"\n", b'{"id": 2}\n', LongLine(45)]
    bad = read_call(LongLine(101), 2)
    assert bad.id == "line-2" and "101 bytes long" in bad.message and str(_input.MAX_LINE_BYTES) in bad.message


# ------------------------------------------------------------------------------------------------ output


def test_output_is_valid_utf8_json_whatever_the_ids_and_outputs_hold(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(
        b'{"id": "k\\ud800", "name": "echo", "arguments": {"text": "lone \\udfff end"}}\n'
        + line({"id": "surrogate", "name": "odd_output", "arguments": {"kind": "surrogate"}})
        + line({"id": "nan", "name": "odd_output", "arguments": {"kind": "nan"}})
        + line({"id": "bigint", "name": "odd_output", "arguments": {"kind": "bigint"}})
        + line({"id": "deep", "name": "odd_output", "arguments": {"kind": "deep"}})
        + line({"id": "unprintable", "name": "odd_output", "arguments": {"kind": "unprintable"}})
        + line({"id": "plain", "name": "echo", "arguments": {"text": "héllo ✓"}}))
    out_path = tmp_path / "out.jsonl"
    for mode in ("fork", "sequential"):
        proc = toolfork("run", str(calls), "--tools", HOSTILE, "--mode", mode, "-o", str(out_path), "-q")
        assert proc.returncode == 1 and b"Traceback" not in proc.stderr, proc.stderr
        raw = out_path.read_bytes()
        assert b"\xed\xa0\x80" not in raw and b"NaN" not in raw and b"Infinity" not in raw
        out = records(raw)  # strict UTF-8, then JSON
        by_id = {r["id"]: r for r in out}
        assert list(by_id) == ["k\ud800", "surrogate", "nan", "bigint", "deep", "unprintable", "plain"]
        # Lone surrogates come back as the same strings (escaped as \\udXXX in an ASCII line).
        assert by_id["k\ud800"]["output"]["content"][0]["text"] == "lone \udfff end"
        assert by_id["surrogate"]["output"]["data"] == {"key\ud800": "v\udc00"}
        assert by_id["nan"]["status"] == "ok" and by_id["nan"]["output"]["data"] == [None, None, 1.5]
        for kind in ("bigint", "unprintable") + (("deep",) if mode == "sequential" else ()):
            assert by_id[kind]["status"] == "error" and by_id[kind]["output"] is None
            assert by_id[kind]["error"]["type"] == "UnwritableResultError"
            assert "could not be written as JSON" in by_id[kind]["error"]["message"]
        assert by_id["deep"]["status"] == "error"  # fork mode: already refused when sent to the host
        assert by_id["plain"]["output"]["content"][0]["text"] == "héllo ✓"
        assert "héllo ✓".encode() in raw  # ordinary lines keep their UTF-8, not \\u escapes


def test_resume_finds_ids_written_with_escapes(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(b'{"id": "k\\ud800", "name": "echo", "arguments": {"text": "a"}}\n'
                      + line({"id": "b", "name": "echo", "arguments": {"text": "b"}}))
    out_path = tmp_path / "out.jsonl"
    first = toolfork("run", str(calls), "--tools", HOSTILE, "-o", str(out_path), "-q")
    assert first.returncode == 0, first.stderr
    again = toolfork("run", str(calls), "--tools", HOSTILE, "-o", str(out_path), "--resume", "-q")
    assert again.returncode == 0, again.stderr
    assert [r["id"] for r in records(out_path.read_bytes())] == ["k\ud800", "b"]
    assert json.loads(out_path.read_bytes().splitlines()[0])["id"] == "k\ud800"
