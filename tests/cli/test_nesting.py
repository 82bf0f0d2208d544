"""The run command's JSON depth limit: the same verdict on every Python, whatever the interpreter's own
recursion limits would allow (3.13 parses and writes thousands of levels where 3.11 gives up)."""

from __future__ import annotations

import json

import pytest

from toolfork.commands._input import read_call
from toolfork.commands._loading import BadLine
from toolfork.commands._nesting import MAX_JSON_DEPTH, nested_deeper_than
from toolfork.commands._output import encode_record


@pytest.mark.parametrize("kind", [str, bytes])
def test_depth_is_counted_outside_strings_only(kind: type) -> None:
    def t(s: str) -> str | bytes:
        return s if kind is str else s.encode()

    assert nested_deeper_than(t("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)))
    assert not nested_deeper_than(t("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH))
    assert not nested_deeper_than(t(json.dumps({"text": "[" * 5000})))  # brackets in a string
    assert not nested_deeper_than(t(json.dumps({"t": '\\" [[' * 600, "u": [[1], [2]] * 600})))  # wide, not deep
    assert nested_deeper_than(t('{"a": "x\\"", "b": ' + "{" * 600 + "}" * 600 + "}"))


def test_a_line_deeper_than_the_limit_is_refused_unread_on_every_python() -> None:
    deep = b'{"id": "deep", "name": "echo", "arguments": {"x": ' + b"[" * 600 + b"]" * 600 + b"}}"
    bad = read_call(deep, 7)
    assert isinstance(bad, BadLine) and bad.id == "line-7" and "nested too deeply" in bad.message
    # The same arguments as an OpenAI JSON string: refused the same way, not left to json.loads.
    inner = json.dumps({"x": json.loads(b"[" * 600 + b"]" * 600)}, separators=(",", ":"))
    openai = json.dumps({"id": "o", "type": "function", "function": {"name": "echo", "arguments": inner}})
    bad = read_call(openai.encode(), 8)
    assert isinstance(bad, BadLine) and bad.id == "line-8" and "nested too deeply" in bad.message


def test_a_record_deeper_than_the_limit_is_replaced_on_every_python() -> None:
    data: list = []
    for _ in range(MAX_JSON_DEPTH + 10):
        data = [data]
    line, record = encode_record({"id": "d", "name": "t", "status": "ok", "output": {"data": data},
                                  "error": None, "duration_s": 0.0})
    assert record["status"] == "error" and record["error"]["type"] == "UnwritableResultError"
    assert f"nested more than {MAX_JSON_DEPTH} levels" in record["error"]["message"]
    assert json.loads(line)["id"] == "d"
    shallow, kept = encode_record({"id": "s", "name": "t", "status": "ok", "output": {"data": [[[1]]]},
                                   "error": None, "duration_s": 0.0})
    assert kept["status"] == "ok" and json.loads(shallow)["output"]["data"] == [[[1]]]
