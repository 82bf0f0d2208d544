"""The governance tests' shared fixtures, and the order they run in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.governance.executors import Executors


@pytest.fixture
def executors() -> Iterator[Executors]:
    """Executors closed at the end of the test, with every process they had checked gone."""
    made = Executors()
    try:
        yield made
    finally:
        made.close_all()


def pytest_collection_modifyitems(items: list) -> None:
    """These tests fork children that must run one thread (a namespace or a Landlock domain binds only
    the calling thread). A library another test used can leave an at-fork hook that starts a thread in
    every child of that pytest worker; run these (and the sandbox's escape
    suite) first, before any other test has run in the worker."""
    first = ("/tests/governance/", "/tests/redteam/sandbox/")
    items.sort(key=lambda item: not any(d in str(item.path) for d in first))
