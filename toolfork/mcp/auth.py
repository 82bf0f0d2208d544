"""OAuth for ``MCPConnector(url=..., auth=...)``: the SDK's client OAuth providers, and where their tokens live.

The flows themselves are the SDK's (``mcp.client.auth``): protected-resource and authorization-server
discovery, dynamic or metadata-document client registration, authorization code with PKCE, client
credentials (secret or ``private_key_jwt``), token refresh, RFC 8707 resource indicators and scope
step-up. What they leave to the application is where tokens and client registrations are kept, so
this module adds two ``TokenStorage`` implementations and shortcuts that build a provider with one:

    conn = MCPConnector(url=URL, auth=client_credentials(URL, "my-id", "my-secret",
                                                         storage=FileTokenStorage("~/.config/app/mcp.json")))
    conn = MCPConnector(url=URL, auth=authorization_code(URL, redirect_handler=open_browser,
                                                         callback_handler=wait_for_redirect))

Any ``httpx2.Auth`` works as ``auth=`` too (an SDK provider built by hand, a custom scheme). The
provider runs on the connector's loop thread, so its handlers are coroutines of that loop.

``FileTokenStorage`` keeps one JSON file, written atomically (temporary file, then rename) with mode
0600, so a crash mid-write leaves the previous tokens, and other users of the machine cannot read them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken


class InMemoryTokenStorage:
    """Tokens and the client registration for as long as the process lives (the default)."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client_info = client_info


class FileTokenStorage:
    """Tokens and the client registration in one JSON file (``{"tokens": ..., "client_info": ...}``),
    so a restarted program reuses them instead of asking the user again. A file that is not such a
    document is an error naming the file, never silently replaced."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()  # not an asyncio lock: the connector's loop may be a new one after close()

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the token file {self.path} is not JSON ({exc}); move it away to start afresh") from None
        if not isinstance(data, dict):
            raise ValueError(f"the token file {self.path} holds {type(data).__name__}, not a JSON object")
        return data

    def _write(self, key: str, value: dict[str, Any]) -> None:
        data = self._read()
        data[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                os.fchmod(f.fileno(), 0o600)
                json.dump(data, f)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        with self._lock:
            raw = self._read().get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        with self._lock:
            self._write("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        with self._lock:
            raw = self._read().get("client_info")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        with self._lock:
            self._write("client_info", client_info.model_dump(mode="json", exclude_none=True))


def authorization_code(server_url: str, *, redirect_handler: Callable[[str], Awaitable[None]],
                       callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
                       redirect_uris: list[str] | tuple[str, ...] = ("http://localhost:3000/callback",),
                       client_name: str = "toolfork", scope: str | None = None, storage: Any = None,
                       client_metadata_url: str | None = None) -> OAuthClientProvider:
    """The authorization code flow with PKCE: ``redirect_handler(url)`` sends the user to the
    authorization URL, ``callback_handler()`` returns the code (and state) the redirect brought back.
    The client registers itself (dynamically, or by ``client_metadata_url`` where the server supports
    metadata documents) unless ``storage`` already holds a registration; tokens are refreshed with the
    refresh token when they expire."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    metadata = OAuthClientMetadata.model_validate({
        "client_name": client_name, "redirect_uris": list(redirect_uris), "scope": scope,
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]})
    return OAuthClientProvider(server_url=server_url, client_metadata=metadata,
                               storage=storage if storage is not None else InMemoryTokenStorage(),
                               redirect_handler=redirect_handler, callback_handler=callback_handler,
                               client_metadata_url=client_metadata_url)


def client_credentials(server_url: str, client_id: str, client_secret: str | None = None, *,
                       private_key_pem: str | None = None, signing_algorithm: str = "ES256",
                       token_endpoint_auth_method: str = "client_secret_basic", scope: str | None = None,
                       storage: Any = None) -> OAuthClientProvider:
    """The client credentials grant (machine to machine): with ``client_secret`` (sent as
    ``client_secret_basic`` or ``client_secret_post``), or with ``private_key_pem``, which signs a
    ``private_key_jwt`` assertion for each token request instead."""
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
        SignedJWTParameters,
    )

    store = storage if storage is not None else InMemoryTokenStorage()
    if (client_secret is None) == (private_key_pem is None):
        raise ValueError("client_credentials() needs exactly one of client_secret= or private_key_pem=")
    if private_key_pem is not None:
        jwt = SignedJWTParameters(issuer=client_id, subject=client_id, signing_algorithm=signing_algorithm,
                                  signing_key=private_key_pem)
        return PrivateKeyJWTOAuthProvider(server_url=server_url, storage=store, client_id=client_id,
                                          assertion_provider=jwt.create_assertion_provider(), scope=scope)
    if token_endpoint_auth_method not in ("client_secret_basic", "client_secret_post"):
        raise ValueError("token_endpoint_auth_method must be 'client_secret_basic' or 'client_secret_post', "
                         f"got {token_endpoint_auth_method!r}")
    assert client_secret is not None
    return ClientCredentialsOAuthProvider(server_url=server_url, storage=store, client_id=client_id,
                                          client_secret=client_secret, scope=scope,
                                          token_endpoint_auth_method=token_endpoint_auth_method)  # type: ignore[arg-type]


__all__ = ["FileTokenStorage", "InMemoryTokenStorage", "authorization_code", "client_credentials"]
