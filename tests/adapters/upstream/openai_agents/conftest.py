"""Runs the Agents SDK's own function-tool tests (vendored unchanged from the openai-agents 0.24.0 sdist,
MIT licence in LICENSE here) with ``function_tool`` rebound to toolfork's: one import line added to each
file, no assertion changed.

The suite collects these files only inside the run that ``tests/adapters/test_upstream_suites.py``
starts (``TOOLFORK_UPSTREAM=1``): that test checks the outcome as a whole, the published count, and
that each test that fails is one of the listed process-boundary differences, with nothing skipped.
Run them directly with ``TOOLFORK_UPSTREAM=1 ./scripts/test.sh tests/adapters/upstream -n 2``.

Their async tests were written for pytest-asyncio's auto mode; ``run_async_tests`` runs them with
``asyncio.run`` instead (this suite has no asyncio plugin). The pool they run on is the process's default
Executor, started here before any test, so its workers (and those that replace killed ones) are not
taken for processes a test left behind; it is closed when the module's tests are done.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

pytest.importorskip("agents")
pytest.importorskip("inline_snapshot")

from tests.conftest import allow_process
from toolfork.adapters.callables import default_executor

# Seen only by the run test_upstream_suites.py starts (see above).
collect_ignore_glob = [] if os.environ.get("TOOLFORK_UPSTREAM") == "1" else ["test_*.py"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "asyncio: an async test (run by this directory's conftest)")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = inspect.signature(pyfuncitem.obj).parameters
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(pyfuncitem.obj(**kwargs))
    return True


@pytest.fixture(scope="module", autouse=True)
def pool() -> Iterator[None]:
    ex = default_executor()
    for p in psutil.Process().children(recursive=True):
        allow_process(p.pid)
    yield
    ex.close()
