"""to_langchain / from_langchain: LangChain tools whose calls run in the pool, and the way back."""

from __future__ import annotations

import asyncio
import os

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.messages import ToolMessage
from langchain_core.tools import ToolException

from tests.adapters.adapter_tools import add, crash, hang, nap, naps, where
from tests.adapters.lc_tools import lc_count_messages, lc_shout, lc_where
from toolfork.adapters.langchain import ToolCallTimedOut, from_langchain, to_langchain
from toolfork.executor import Executor, ToolCall
from toolfork.tools.errors import ToolDefinitionError


def test_to_langchain_tools_run_in_workers_sync_and_async() -> None:
    with Executor([where, add, nap], workers=3) as ex:
        lc_where_, lc_add, lc_nap = to_langchain([where, add, nap], ex)
        assert lc_add.invoke({"a": 2, "b": 3}) == "5"
        assert f'"pid": {os.getpid()}' not in lc_where_.invoke({"tag": "x"})

        async def three_naps() -> list[str]:
            return await asyncio.gather(*(lc_nap.ainvoke({"seconds": 0.3}) for _ in range(3)))

        pids, together = naps(asyncio.run(three_naps()))
        assert os.getpid() not in pids and len(pids) == 3 and together  # the three awaited calls overlapped


def test_to_langchain_failures_are_error_tool_messages_by_default_or_raise() -> None:
    with Executor([add, crash, hang], workers=2) as ex:
        lc_add, lc_crash = to_langchain([add, crash], ex)
        msg = lc_add.invoke({"type": "tool_call", "id": "k1", "name": "add", "args": {"a": 1, "b": "x"}})
        assert isinstance(msg, ToolMessage) and msg.status == "error" and "ToolInputError" in msg.content
        msg = lc_crash.invoke({"type": "tool_call", "id": "k2", "name": "crash", "args": {}})
        assert msg.status == "error" and "crashed" in msg.content
        [strict_hang] = to_langchain([hang], ex, handle_tool_error=False)
        with pytest.raises(ToolCallTimedOut) as info:
            strict_hang.invoke({})
        assert isinstance(info.value, ToolException) and info.value.result.status == "timeout"


def test_from_langchain_runs_the_langchain_tool_in_a_worker_with_its_schema() -> None:
    converted = from_langchain(lc_where, timeout=5)
    assert converted.name == "lc_where" and converted.timeout == 5
    assert converted.to_json_schema()["required"] == ["tag"]
    with Executor([converted], workers=1) as ex:
        [ok, bad] = ex.run([ToolCall("1", "lc_where", {"tag": "t"}), ToolCall("2", "lc_where", {"tag": 3})])
    assert ok.ok and ok.output is not None
    tag, pid = ok.output.as_text().split(":")
    assert tag == "t" and int(pid) == ok.worker_pid != os.getpid()
    assert bad.status == "error" and bad.error is not None and bad.error.type == "ToolInputError"


def test_from_langchain_takes_a_list_as_to_langchain_does() -> None:
    converted = from_langchain([lc_where, lc_shout], timeout=7)
    assert [t.name for t in converted] == ["lc_where", "lc_shout"] and {t.timeout for t in converted} == {7}
    with Executor(converted, workers=1) as ex:
        back = to_langchain(converted, ex)
        assert back[1].invoke({"text": "hi"}) == "HI"
    with pytest.raises(TypeError, match="takes a LangChain BaseTool, got int"):
        from_langchain([lc_where, 3])  # type: ignore[list-item]


def test_from_langchain_refuses_tools_with_injected_arguments() -> None:
    with pytest.raises(ToolDefinitionError, match=r"lc_count_messages.*state.*injected.*ToolforkToolNode"):
        from_langchain(lc_count_messages)


def test_a_shared_executor_without_a_langchain_tool_says_how_to_fix_it() -> None:
    with Executor([add], workers=1) as ex, pytest.raises(ValueError, match="create the Executor with these tools"):
        to_langchain([from_langchain(lc_where)], ex)
