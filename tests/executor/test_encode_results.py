"""``Executor(encode_results=...)``: a fork worker turns each clean ok result into bytes itself, so the
host of a batch job writes lines instead of rebuilding and re-encoding outputs. Every other result
(an error, an error output, context updates, an encoder that fails) crosses as itself."""

from __future__ import annotations

import os
from typing import Any

import pytest

from toolfork.executor import ToolCall, ToolResult
from toolfork.executor.wire import oob
from toolfork.tools import ToolOutput, ToolRuntime, tool


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@tool
def fails(message: str) -> str:
    """Raise."""
    raise ValueError(message)


@tool
def soft(reason: str) -> ToolOutput:
    """An error output: the tool ran and reports a failure."""
    return ToolOutput.error(reason)


@tool
def remember(key: str, runtime: ToolRuntime) -> str:
    """Ask the host to merge a context update."""
    runtime.set_context({key: True})
    return key


@tool
def large(size: int) -> str:
    """A result large enough to cross by memory file."""
    return "y" * size


TOOLS = [shout, fails, soft, remember, large]


def in_worker(result: ToolResult) -> bytes:
    """The encoder: names the process it ran in, so the test can tell where that was."""
    assert result.output is not None
    return f"{os.getpid()}|{result.call_id}|{result.output.as_text()}".encode()


def test_ok_results_come_back_encoded_by_the_worker_that_ran_them(make_executor: Any) -> None:
    ex = make_executor(TOOLS, encode_results=in_worker)
    results = ex.run([ToolCall(f"c{i}", "shout", {"text": f"héllo {i}"}) for i in range(20)])
    assert [r.status for r in results] == ["ok"] * 20
    for i, r in enumerate(results):
        assert r.output is None  # the bytes stand for it
        assert r.encoded == f"{r.worker_pid}|c{i}|HÉLLO {i}".encode()
        assert r.worker_pid != os.getpid()


def test_every_other_result_crosses_as_itself(make_executor: Any) -> None:
    ex = make_executor(TOOLS, encode_results=in_worker)
    err, soft_fail, ctx, ok = ex.run([
        ToolCall("e", "fails", {"message": "nope"}),
        ToolCall("s", "soft", {"reason": "not found"}),
        ToolCall("c", "remember", {"key": "seen"}),
        ToolCall("o", "shout", {"text": "x"}),
    ])
    assert err.status == "error" and err.encoded is None and "nope" in err.error.message
    assert soft_fail.status == "ok" and soft_fail.encoded is None and soft_fail.output.is_error
    assert ctx.encoded is None and ctx.output.as_text() == "seen" and ex.context == {"seen": True}
    assert ok.encoded is not None and ok.encoded.endswith(b"|o|X")


@pytest.mark.parametrize("encoder", [
    pytest.param(lambda r: 1 / 0, id="raises"),
    pytest.param(lambda r: "a str, not bytes", id="not-bytes"),
    pytest.param(lambda r: None, id="declines"),
])
def test_an_encoder_that_fails_or_declines_leaves_the_result_as_it_is(make_executor: Any, encoder: Any) -> None:
    ex = make_executor(TOOLS, encode_results=encoder)
    [r] = ex.run([ToolCall("a", "shout", {"text": "still here"})])
    assert r.status == "ok" and r.encoded is None and r.output.as_text() == "STILL HERE"
    [again] = ex.run([ToolCall("b", "shout", {"text": "worker alive"})])
    assert again.output.as_text() == "WORKER ALIVE"


@pytest.mark.skipif(not oob.available(), reason="memory files are Linux-only")
def test_a_large_encoded_result_crosses_whole(make_executor: Any) -> None:
    ex = make_executor(TOOLS, encode_results=in_worker)
    size = oob.LARGE_FRAME * 3
    results = ex.run([ToolCall(f"l{i}", "large", {"size": size + i}) for i in range(4)])
    for i, r in enumerate(results):
        assert r.encoded == f"{r.worker_pid}|l{i}|".encode() + b"y" * (size + i)


def test_sequential_mode_returns_outputs_as_they_are(make_executor: Any) -> None:
    """The encoder is for fork workers; in the host there is nothing to save by it."""
    ex = make_executor(TOOLS, mode="sequential", encode_results=in_worker)
    [r] = ex.run([ToolCall("a", "shout", {"text": "x"})])
    assert r.encoded is None and r.output.as_text() == "X"
