"""``ToolCall.meta``: string keys and values the caller attaches to a call, read by the tool as
``runtime.meta`` wherever it runs (a warm worker, a process of its own, the host), and carried by
``toolfork run`` from a ``"meta"`` object on the input line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.observability.tools_traced import TOOLS
from toolfork.executor import Executor, ToolCall

ROOT = Path(__file__).resolve().parents[2]
META = {"tenant": "acme", "request": "r-42", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}


def _text(result: Any) -> str:
    assert result.status == "ok", (result.status, result.error)
    return str(result.output.content[0].text)


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_meta_reaches_the_tool_wherever_it_runs(mode: str) -> None:
    with Executor(TOOLS, mode=mode, workers=2) as ex:
        results = ex.run([ToolCall("w", "show_meta", {}, meta=META),
                          ToolCall("i", "show_meta_inline", {}, meta={"where": "inline"}),
                          ToolCall("f", "show_meta_fresh", {}, meta={"where": "fresh"}),
                          ToolCall("none", "show_meta", {}),
                          {"id": "d", "name": "show_meta", "arguments": {}, "meta": {"from": "dict"}}])
        assert [json.loads(_text(r)) for r in results] == [META, {"where": "inline"}, {"where": "fresh"}, {},
                                                           {"from": "dict"}]
        # Single calls, from a thread and from asyncio, carry theirs too.
        assert json.loads(_text(ex.submit(ToolCall("s", "show_meta", {}, meta={"k": "submit"})).result())) == \
            {"k": "submit"}
        acalled = asyncio.run(ex.acall(ToolCall("a", "show_meta", {}, meta={"k": "acall"})))
        assert json.loads(_text(acalled)) == {"k": "acall"}


def test_the_tool_cannot_change_its_meta() -> None:
    with Executor(TOOLS, mode="fork", workers=1) as ex:
        assert _text(ex.run([ToolCall("p", "poke_meta", {}, meta={"tenant": "acme"})])[0]) == "refused: TypeError"


def test_meta_is_a_copy_taken_when_the_call_is_made() -> None:
    meta = {"tenant": "acme"}
    call = ToolCall("c", "show_meta", {}, meta=meta)
    meta["tenant"] = "changed later"
    with Executor(TOOLS, mode="fork", workers=1) as ex:
        assert json.loads(_text(ex.run([call])[0])) == {"tenant": "acme"}


@pytest.mark.parametrize(("meta", "words"), [
    ({"tenant": 7}, ["meta['tenant']", "must be a str", "int"]),
    ({3: "x"}, ["meta key 3", "must be a str"]),
    ({"nested": {"a": "b"}}, ["meta['nested']", "dict"]),
    (["tenant", "acme"], ["meta must be a mapping", "list"]),
])
def test_bad_meta_is_refused_naming_what_is_wrong(meta: Any, words: list[str]) -> None:
    with pytest.raises(TypeError) as caught:
        ToolCall("c1", "show_meta", {}, meta=meta)
    said = str(caught.value)
    assert "call 'c1'" in said
    for word in words:
        assert word in said, said
    with Executor(TOOLS, mode="sequential") as ex, pytest.raises(ValueError) as as_dict:
        ex.run([{"id": "c1", "name": "show_meta", "arguments": {}, "meta": meta}])
    assert words[0] in str(as_dict.value)


@pytest.mark.parametrize("lane", ["1", "0"])
def test_toolfork_run_carries_meta_and_fails_only_the_line_with_bad_meta(tmp_path: Path, lane: str) -> None:
    lines = [
        {"id": "good", "name": "show_meta", "arguments": {}, "meta": {"tenant": "acme"}},
        {"id": "bad", "name": "show_meta", "arguments": {}, "meta": {"tenant": 5}},
        {"id": "plain", "name": "show_meta", "arguments": {}},
        {"id": "notmap", "name": "show_meta", "arguments": {}, "meta": "acme"},
        {"id": "after", "name": "show_meta", "arguments": {}, "meta": {"n": "2"}},
    ]
    calls = tmp_path / "calls.jsonl"
    calls.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    env = {"PYTHONPATH": str(ROOT), "TOOLFORK_LINE_LANE": lane, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "toolfork", "run", str(calls), "-o", str(out), "-q", "--mode",
                           "fork", "--workers", "2", "--tools", "tests/observability/tools_traced.py:TOOLS"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(records) == sorted(line["id"] for line in lines), done.stderr
    assert json.loads(records["good"]["output"]["content"][0]["text"]) == {"tenant": "acme"}
    assert json.loads(records["plain"]["output"]["content"][0]["text"]) == {}
    assert json.loads(records["after"]["output"]["content"][0]["text"]) == {"n": "2"}
    for bad, words in (("bad", ["meta['tenant']", "must be a str"]), ("notmap", ["meta must be a mapping"])):
        record = records[bad]
        assert record["status"] == "error", record
        for word in words:
            assert word in record["error"]["message"], record


def test_toolfork_worker_carries_meta() -> None:
    lines = [{"id": "w1", "name": "show_meta", "arguments": {}, "meta": {"tenant": "acme"}},
             {"id": "w2", "name": "show_meta", "arguments": {}, "meta": {"tenant": ["not", "a", "str"]}}]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "toolfork", "worker", "--mode", "fork", "--workers", "1",
                           "--tools", "tests/observability/tools_traced.py:TOOLS"],
                          input="".join(json.dumps(line) + "\n" for line in lines), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    records = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert json.loads(records["w1"]["output"]["content"][0]["text"]) == {"tenant": "acme"}, done.stderr
    assert records["w2"]["status"] == "error" and "meta['tenant'] must be a str" in records["w2"]["error"]["message"]
