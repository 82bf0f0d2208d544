"""``MCPConnector(url=..., auth=client_credentials(...))`` against a real OAuth-protected SDK server
(``oauth_server.py``): the token is obtained, used by calls in fork workers, kept in the file the user
chose and reused from it by a new connector (no second token request); a refused client is an error
naming the reason, before any tool is listed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.mcp.http_servers import serving
from toolfork.executor import Executor, ToolCall
from toolfork.mcp import MCPConnectionError, MCPConnector
from toolfork.mcp.auth import FileTokenStorage, client_credentials

OAUTH_SERVER = [sys.executable, "-m", "tests.mcp.oauth_server"]


def test_client_credentials_token_is_used_stored_and_reused(tmp_path: Path) -> None:
    log, store = tmp_path / "tokens.log", tmp_path / "mcp-tokens.json"
    with serving(OAUTH_SERVER, str(log)) as url:
        with MCPConnector(url=url, auth=client_credentials(url, "toolfork-test", "s3cret",
                                                           storage=FileTokenStorage(store))) as connector:
            with Executor([connector], workers=2) as executor:
                result = executor.run([ToolCall("w", "whoami", {})])[0]
            assert result.ok and result.output is not None, result.error
            assert result.output.as_text() == "toolfork-test"
        assert log.read_text().splitlines() == ["client_credentials issued"]
        saved = json.loads(store.read_text())
        assert saved["tokens"]["access_token"].startswith("access_")

        # A restarted program: a new connector and storage object on the same file.
        with MCPConnector(url=url, auth=client_credentials(url, "toolfork-test", "s3cret",
                                                           storage=FileTokenStorage(store))) as again:
            with Executor([again], workers=2) as executor:
                result = executor.run([ToolCall("w", "whoami", {})])[0]
            assert result.ok and result.output is not None and result.output.as_text() == "toolfork-test"
        assert log.read_text().splitlines() == ["client_credentials issued"]  # the stored token was reused


def test_a_refused_client_is_an_error_naming_the_server(tmp_path: Path) -> None:
    log = tmp_path / "tokens.log"
    with serving(OAUTH_SERVER, str(log)) as url:
        with MCPConnector(url=url, auth=client_credentials(url, "toolfork-test", "wrong")) as connector:
            with pytest.raises(MCPConnectionError, match=url):
                connector.tools()
        assert "client_credentials refused" in log.read_text()
