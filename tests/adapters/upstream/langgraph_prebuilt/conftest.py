"""LangGraph's own ToolNode tests, run against ``ToolforkToolNode``.

The test files next to this one are copied unchanged from the ``langgraph-prebuilt`` 1.1.3 sdist (MIT
licence, see LICENSE here; ``messages.py`` imports ``any_str`` relatively instead of as ``tests.any_str``).
They are vendored rather than fetched at test time: the suite then runs offline, at a pinned version,
and a reviewer sees exactly what runs.

The one line that makes them ours rebinds ``ToolNode`` where the test files import it from, before they
are imported. ``TOOLFORK_UPSTREAM_STOCK=1`` keeps the stock ``ToolNode`` (to compare the counts).

The tests that cannot pass across a process boundary are listed in ``BOUNDARY`` with the reason (the same
list is in docs/internals.md, "Adapters"). Each is run as it is, and the test passes only if the upstream test fails
with the ``AssertionError`` the boundary explains (the text of its failed ``is`` check): so the suite
fails if one of them starts passing, and fails if one fails another way. Nothing is skipped. The same
holds for ``STOCK_FAILS_BELOW_311``: tests the stock node fails too on Python 3.10.

Besides the rebinding, this file provides the fixtures the upstream conftest provides in its default
("fast") mode: in-memory checkpointers and stores, and the asyncio backend for ``pytest.mark.anyio``;
and it closes the nodes a test built (the upstream tests never close a ``ToolNode``; ours own a pool).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import langgraph.prebuilt
import langgraph.prebuilt.tool_node
import pytest
from langgraph.store.memory import InMemoryStore

from toolfork.adapters.langgraph import ToolforkToolNode

from .memory_assert import MemorySaverAssertImmutable

STOCK = os.environ.get("TOOLFORK_UPSTREAM_STOCK") == "1"


class _ClosedAfterTest(ToolforkToolNode):
    """``ToolforkToolNode`` that remembers itself so the fixture below can close it after the test.

    Its own pool has 2 workers unless a test asks otherwise: the upstream tests build a node per test
    (several, some of them), run a call or a few at a time and never wait for two calls to meet, so the
    default pool (4 per CPU, at least 4) would only fork workers that never get a call."""

    built: list[ToolforkToolNode] = []

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        if kwargs.get("executor") is None and len(args) < 2:
            kwargs.setdefault("workers", 2)
        super().__init__(*args, **kwargs)
        _ClosedAfterTest.built.append(self)


if not STOCK:
    langgraph.prebuilt.ToolNode = langgraph.prebuilt.tool_node.ToolNode = _ClosedAfterTest  # type: ignore[misc]

_SAME_OBJECT = ("asserts that the tool received the host's very ExecutionInfo object (`is`); a tool in a worker "
                "process gets a copy")
BOUNDARY = {
    "test_tool_node.py::test_tool_runtime_forwards_execution_info_server_info_and_tools": _SAME_OBJECT,
    "test_tool_node.py::test_tool_runtime_forwards_execution_info_server_info_and_tools_async": _SAME_OBJECT,
}


# On Python 3.10 LangGraph's ``interrupt()`` cannot find its config inside an async tool (contextvars do
# not follow asyncio tasks before 3.11), so these upstream tests fail for the stock ToolNode too. Each is
# run as it is and passes only if it fails that same way: ours behaves as stock there.
# The tool's RuntimeError, or, where the test's handle_tool_errors turns it into a message, no pause
# (the test then finds no "__interrupt__" in the graph's output).
_NO_ASYNC_CONFIG = ("get_config outside of a runnable context", "KeyError: '__interrupt__'")
STOCK_FAILS_BELOW_311 = ("test_tool_node.py::test_tool_node_reraises_invalid_resume_async[",)


def _messages(exc: BaseException) -> list[str]:
    inner = getattr(exc, "exceptions", None)
    if inner:
        return [m for e in inner for m in _messages(e)]
    return [f"{type(exc).__name__}: {exc}"]


def _fails_as_said(test: Callable[..., Any], expected: type[BaseException], *says: str) -> Callable[..., Any]:
    """``test``, turned into the check that it fails with ``expected`` whose text holds one of ``says``."""

    def check(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        found = _messages(excinfo.value)
        assert any(s in m for s in says for m in found), f"expected a failure saying one of {says!r}; got {found}"

    if inspect.iscoroutinefunction(test):
        @functools.wraps(test)
        async def boundary_async(*args: Any, **kwargs: Any) -> None:
            with pytest.raises(expected) as excinfo:
                await test(*args, **kwargs)
            check(excinfo)

        return boundary_async

    @functools.wraps(test)
    def boundary(*args: Any, **kwargs: Any) -> None:
        with pytest.raises(expected) as excinfo:
            test(*args, **kwargs)
        check(excinfo)

    return boundary


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        key = f"{item.path.name}::{item.name}"
        if sys.version_info < (3, 11) and key.startswith(STOCK_FAILS_BELOW_311):
            item.obj = _fails_as_said(item.obj, BaseException, *_NO_ASYNC_CONFIG)
        elif not STOCK and key in BOUNDARY:
            item.obj = _fails_as_said(item.obj, AssertionError, " is ")


@pytest.fixture(autouse=True)
def _close_nodes() -> Iterator[None]:
    yield
    while _ClosedAfterTest.built:
        _ClosedAfterTest.built.pop().close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sync_checkpointer() -> Iterator[MemorySaverAssertImmutable]:
    yield MemorySaverAssertImmutable()


@pytest.fixture
async def async_checkpointer() -> AsyncIterator[MemorySaverAssertImmutable]:
    yield MemorySaverAssertImmutable()


@pytest.fixture
def sync_store() -> Iterator[InMemoryStore]:
    yield InMemoryStore()


@pytest.fixture
async def async_store() -> AsyncIterator[InMemoryStore]:
    yield InMemoryStore()
