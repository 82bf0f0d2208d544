"""The adapters honour a tool's cap and limits as they are: the framework's own concurrency (LangChain's
``ainvoke`` gathered, the Agents SDK's parallel function calls) goes through the Executor's caps."""

from __future__ import annotations

import asyncio
import copy

import pytest

pytest.importorskip("langchain_core")

import itertools

from langchain_core.messages import ToolMessage

from tests.adapters.adapter_tools import nap
from toolfork import Limits, tool
from toolfork.adapters.langchain import to_langchain
from toolfork.executor import Executor


@tool(limits=Limits(memory_mb=64))
def hog(mb: int) -> int:
    """Allocate memory.

    Args:
        mb: how many MiB
    """
    return len(bytearray(mb * 1024 * 1024))


def _spans(texts: list[str]) -> list[tuple[float, float]]:
    return sorted((float(t.split()[1]), float(t.split()[2])) for t in texts)


def test_langchain_calls_gathered_at_once_keep_the_tools_cap() -> None:
    capped = copy.copy(nap).configure(max_concurrency=1)
    with Executor([capped], workers=3) as ex:
        [lc_nap] = to_langchain([capped], ex)

        async def three() -> list[str]:
            return await asyncio.gather(*(lc_nap.ainvoke({"seconds": 0.3}) for _ in range(3)))

        spans = _spans(asyncio.run(three()))
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - 0.05, f"two calls of a max_concurrency=1 tool overlapped: {spans}"


def test_a_limit_hit_through_langchain_is_an_error_tool_message_naming_it() -> None:
    with Executor([hog], workers=1) as ex:
        [lc_hog] = to_langchain([hog], ex)
        msg = lc_hog.invoke({"type": "tool_call", "id": "k1", "name": "hog", "args": {"mb": 1024}})
        ok = lc_hog.invoke({"type": "tool_call", "id": "k2", "name": "hog", "args": {"mb": 8}})
    assert isinstance(msg, ToolMessage) and msg.status == "error"
    assert "LimitExceeded" in msg.content and "memory limit of 64 MB exceeded" in msg.content
    assert ok.status == "success" and ok.content == str(8 * 1024 * 1024)
