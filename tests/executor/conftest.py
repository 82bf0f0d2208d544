"""Fixtures for the executor tests: one executor per test, always closed, in each backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.executor import tools_for_tests as T
from toolfork.executor import Executor

# The backends that share the contract suite (test_contract.py). Ray adds itself in its own module.
CONTRACT_MODES = ["fork", "sequential"]


@pytest.fixture(params=CONTRACT_MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_executor() -> Iterator[Callable[..., Executor]]:
    """Build executors that are closed at the end of the test whatever happens."""
    made: list[Executor] = []

    def make(tools: Any = None, **kwargs: Any) -> Executor:
        kwargs.setdefault("workers", 2)
        ex = Executor(T.ALL if tools is None else tools, **kwargs)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.close()
