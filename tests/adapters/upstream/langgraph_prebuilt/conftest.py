"""LangGraph's own ToolNode tests, run against ``ToolforkToolNode``.

The test files next to this one are copied unchanged from the ``langgraph-prebuilt`` 1.1.3 sdist (MIT
licence, see LICENSE here; ``messages.py`` imports ``any_str`` relatively instead of as ``tests.any_str``).
They are vendored rather than fetched at test time: the suite then runs offline, at a pinned version,
and a reviewer sees exactly what runs.

The one line that makes them ours rebinds ``ToolNode`` where the test files import it from, before they
are imported. ``TOOLFORK_UPSTREAM_STOCK=1`` keeps the stock ``ToolNode`` (to compare the counts).

The tests that cannot pass across a process boundary are listed in ``BOUNDARY`` with the reason (the same
list is in docs/adapters.md). Each is run as it is, and the test passes only if the upstream test fails
with the ``AssertionError`` the boundary explains (the text of its failed ``is`` check): so the suite
fails if one of them starts passing, and fails if one fails another way. Nothing is skipped.

Besides the rebinding, this file provides the fixtures the upstream conftest provides in its default
("fast") mode: in-memory checkpointers and stores, and the asyncio backend for ``pytest.mark.anyio``;
and it closes the nodes a test built (the upstream tests never close a ``ToolNode``; ours own a pool).
"""

from __future__ import annotations

import functools
import inspect
import os
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
    """``ToolforkToolNode`` that remembers itself so the fixture below can close it after the test."""

    built: list[ToolforkToolNode] = []

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
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


def _fails_at_the_boundary(test: Callable[..., Any], reason: str) -> Callable[..., Any]:
    """``test``, turned into the check that it fails the way ``reason`` says and no other way."""

    def check(excinfo: pytest.ExceptionInfo[AssertionError]) -> None:
        assert " is " in str(excinfo.value), f"expected the identity check to fail ({reason}); got {excinfo.value}"

    if inspect.iscoroutinefunction(test):
        @functools.wraps(test)
        async def boundary_async(*args: Any, **kwargs: Any) -> None:
            with pytest.raises(AssertionError) as excinfo:
                await test(*args, **kwargs)
            check(excinfo)

        return boundary_async

    @functools.wraps(test)
    def boundary(*args: Any, **kwargs: Any) -> None:
        with pytest.raises(AssertionError) as excinfo:
            test(*args, **kwargs)
        check(excinfo)

    return boundary


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if STOCK:
        return
    for item in items:
        reason = BOUNDARY.get(f"{item.path.name}::{item.name}")
        if reason is not None and isinstance(item, pytest.Function):
            item.obj = _fails_at_the_boundary(item.obj, reason)


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
