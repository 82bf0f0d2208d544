"""LangGraph's own ToolNode tests, run against ``ToolforkToolNode``.

The test files next to this one are copied unchanged from the ``langgraph-prebuilt`` 1.1.3 sdist (MIT
licence, see LICENSE here; ``messages.py`` imports ``any_str`` relatively instead of as ``tests.any_str``).
They are vendored rather than fetched at test time: the suite then runs offline, at a pinned version,
and a reviewer sees exactly what runs.

The one line that makes them ours rebinds ``ToolNode`` where the test files import it from, before they
are imported. ``TOOLFORK_UPSTREAM_STOCK=1`` keeps the stock ``ToolNode`` (to compare the counts).

Besides the rebinding, this file provides the fixtures the upstream conftest provides in its default
("fast") mode: in-memory checkpointers and stores, and the asyncio backend for ``pytest.mark.anyio``;
and it closes the nodes a test built (the upstream tests never close a ``ToolNode``; ours own a pool).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

pytest.importorskip("langgraph.prebuilt", reason="needs the [langgraph] extra")

import langgraph.prebuilt
import langgraph.prebuilt.tool_node
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
