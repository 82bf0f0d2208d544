"""The official MCP conformance suite against ``toolfork mcp serve``, at both pinned versions of the
suite (``tests/mcp/conformance.py``): the SDK's own everything-server app served through toolfork
(``--app``: its tools in the fork pool, the rest by the SDK) must pass every scored server scenario,
as the SDK's everything-server does on its own (bench/results/mcp.md has the counts of both).

The suites run once per session (a module fixture): about ten seconds each on a quiet machine.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conformance import failing, run_server_scenarios
from tests.mcp.conftest import http_server

pytestmark = pytest.mark.xdist_group("mcp_conformance")

RUNS = [("0.1.16", None), ("0.2.0-alpha.11", "2025-11-25"), ("0.2.0-alpha.11", "2026-07-28")]


@pytest.fixture(scope="module")
def app_results(npm_tools: Path, sdk_everything_server: Path, track: Any) -> Iterator[dict[Any, Any]]:
    serve = [sys.executable, "-m", "toolfork", "mcp", "serve", "--app", f"{sdk_everything_server}:mcp",
             "--http", "127.0.0.1:0", "--workers", "4", "--timeout", "60"]
    with http_server(serve) as (_, url):
        track()
        yield {run: run_server_scenarios(url, run[0], run[1]) for run in RUNS}


@pytest.mark.parametrize("run", RUNS, ids=[f"{v}-{s or 'active'}" for v, s in RUNS])
def test_sdk_everything_app_through_toolfork_passes_every_scenario(app_results: dict[Any, Any],
                                                                   run: tuple[str, str | None]) -> None:
    results, output = app_results[run]
    assert len(results) >= 30, output[-3000:]
    assert failing(results) == [], output[-6000:]
