"""``toolfork.mcp.auth``: where OAuth tokens live, and the provider shortcuts' argument checks.
(The flows themselves run against the conformance suite's authorization servers, in
``test_conformance_client.py``.)"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from toolfork.mcp.auth import FileTokenStorage, InMemoryTokenStorage, authorization_code, client_credentials

TOKEN = OAuthToken(access_token="at-1", token_type="Bearer", expires_in=3600, refresh_token="rt-1", scope="read")
CLIENT = OAuthClientInformationFull(client_id="cid", client_secret="secret",
                                    redirect_uris=["http://localhost:3000/callback"])  # type: ignore[list-item]


def test_file_storage_survives_a_new_process_view_and_is_private(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "tokens.json"
    store = FileTokenStorage(path)
    assert asyncio.run(store.get_tokens()) is None and asyncio.run(store.get_client_info()) is None
    asyncio.run(store.set_client_info(CLIENT))
    asyncio.run(store.set_tokens(TOKEN))
    again = FileTokenStorage(path)  # as a restarted program sees it
    tokens = asyncio.run(again.get_tokens())
    assert tokens is not None and (tokens.access_token, tokens.refresh_token, tokens.scope) == ("at-1", "rt-1", "read")
    info = asyncio.run(again.get_client_info())
    assert info is not None and (info.client_id, info.client_secret) == ("cid", "secret")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["tokens.json"]  # no temporary file left


def test_a_token_file_that_is_not_a_token_document_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match=f"{path}.*not JSON"):
        asyncio.run(FileTokenStorage(path).get_tokens())
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds list, not a JSON object"):
        asyncio.run(FileTokenStorage(path).set_tokens(TOKEN))
    assert path.read_text() == "[1, 2]"  # never silently replaced


def test_memory_storage_round_trip() -> None:
    store = InMemoryTokenStorage()
    asyncio.run(store.set_tokens(TOKEN))
    assert asyncio.run(store.get_tokens()) is TOKEN


def test_provider_shortcuts_check_their_arguments() -> None:
    with pytest.raises(ValueError, match="exactly one of client_secret= or private_key_pem="):
        client_credentials("http://127.0.0.1:1/mcp", "cid")
    with pytest.raises(ValueError, match="token_endpoint_auth_method must be"):
        client_credentials("http://127.0.0.1:1/mcp", "cid", "s", token_endpoint_auth_method="none")

    async def nowhere(url: str) -> None:
        return None

    async def no_code() -> object:
        raise AssertionError

    provider = authorization_code("http://127.0.0.1:1/mcp", redirect_handler=nowhere,
                                  callback_handler=no_code)  # type: ignore[arg-type]
    assert type(provider).__name__ == "OAuthClientProvider"
