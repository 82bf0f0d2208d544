"""``MCPConnector`` against servers that misbehave (``hostile_server.py``, real SDK servers in a
subprocess): one unusable tool costs only itself, and a listing that never ends is stopped, both
when the page limit and when the deadline is reached, and does not go on after ``tools()`` failed.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import ROOT
from tests.mcp.http_servers import serving
from toolfork.executor import Executor, ToolCall
from toolfork.mcp import MCPConnectionError, MCPConnector, SkippedToolWarning
from toolfork.tools.errors import ToolDefinitionError

HOSTILE = [sys.executable, "-m", "tests.mcp.hostile_server"]


def hostile(mode: str, page_log: Path | None = None, **kw: Any) -> MCPConnector:
    args = [*HOSTILE[1:], mode, *([str(page_log)] if page_log else [])]
    return MCPConnector(HOSTILE[0], args, cwd=str(ROOT), label=mode, **kw)


def pages(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_tool_with_an_invalid_schema_is_skipped_with_a_warning_naming_it() -> None:
    with hostile("bad-schema") as connector:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tools = connector.tools()
        assert [t.name for t in tools] == ["first", "last"]
        skipped = [w for w in caught if issubclass(w.category, SkippedToolWarning)]
        assert len(skipped) == 1
        message = str(skipped[0].message)
        assert "'broken'" in message and "integr" in message and "hostile_server" in message
        assert set(connector.skipped) == {"broken"} and "integr" in connector.skipped["broken"]
        with Executor([connector], workers=2) as executor:
            result = executor.run([ToolCall("c", "last", {"text": "still works"})])[0]
        assert result.ok and result.output is not None and result.output.as_text() == "last:still works"


def test_only_and_exclude_work_next_to_a_bad_tool() -> None:
    with hostile("bad-schema") as connector, warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedToolWarning)
        assert [t.name for t in connector.only(["first"]).tools()] == ["first"]
        assert [t.name for t in connector.exclude(["broken"]).tools()] == ["first", "last"]
        with pytest.raises(ToolDefinitionError, match="no tool 'broken'"):
            connector.only(["broken"]).tools()  # it was left out (with the warning saying why)


@pytest.fixture
def page_log(tmp_path: Path) -> Path:
    return tmp_path / "pages.log"


def test_a_listing_that_never_ends_is_stopped_at_the_page_limit(page_log: Path) -> None:
    with hostile("endless", page_log, max_list_pages=25) as connector:
        with pytest.raises(MCPConnectionError) as caught:
            connector.tools()
        message = str(caught.value)
        assert "25 pages" in message and "max_list_pages=25" in message and "hostile_server" in message
        assert pages(page_log) == 25
        time.sleep(1.5)
        assert pages(page_log) == 25, "the listing went on after tools() had failed"


def test_a_cursor_sent_twice_ends_the_listing(page_log: Path) -> None:
    with hostile("same-cursor", page_log) as connector:
        with pytest.raises(MCPConnectionError, match="a second time"):
            connector.tools()
        assert pages(page_log) == 2


def test_a_listing_past_its_deadline_is_stopped_and_does_not_go_on(page_log: Path) -> None:
    with hostile("slow-endless", page_log, list_timeout=4.0) as connector:
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="did not finish listing its tools in 4s"):
            connector.tools()
        assert time.monotonic() - start < 30
        stopped_at = pages(page_log)
        assert 1 <= stopped_at < 100
        time.sleep(2.0)  # several pages' worth: none more may be asked for
        assert pages(page_log) <= stopped_at + 1  # at most the page that was in flight


def test_listing_bounds_are_checked_when_the_connector_is_built() -> None:
    with pytest.raises(ValueError, match="max_list_pages must be a positive integer"):
        hostile("endless", max_list_pages=0)
    with pytest.raises(ValueError, match="list_timeout must be a positive number"):
        hostile("endless", list_timeout=-1)


def test_a_bad_tool_is_skipped_over_streamable_http_too() -> None:
    with serving(HOSTILE, "bad-schema") as url, MCPConnector(url=url) as connector, \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [t.name for t in connector.tools()] == ["first", "last"]
        assert any("'broken'" in str(w.message) for w in caught if issubclass(w.category, SkippedToolWarning))
