"""An OAuth-protected MCP server (the SDK's ``MCPServer`` as resource server) with a minimal
client-credentials authorization server on the same origin, for the connector's OAuth tests.

``python -m tests.mcp.oauth_server --http PORT TOKEN_LOG`` serves streamable HTTP on 127.0.0.1;
every token request appends its grant type and outcome to TOKEN_LOG, so a test can tell a token that
was reused from one that was asked for again.
"""

from __future__ import annotations

import base64
import secrets
import sys

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import OAuthMetadata, OAuthToken
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse

CLIENT_ID, CLIENT_SECRET, SCOPE = "toolfork-test", "s3cret", "mcp:tools"


def build(port: int, token_log: str) -> object:
    base = f"http://127.0.0.1:{port}"
    issued: dict[str, AccessToken] = {}

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return issued.get(token)

    server = MCPServer("toolfork-oauth-test", token_verifier=Verifier(), auth=AuthSettings(
        issuer_url=AnyHttpUrl(base), resource_server_url=AnyHttpUrl(f"{base}/mcp"), required_scopes=[SCOPE]))

    @server.tool()
    def whoami() -> str:
        """The client id the access token was issued to."""
        token = get_access_token()
        return token.client_id if token is not None else "anonymous"

    @server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])
    async def metadata(request: Request) -> JSONResponse:
        meta = OAuthMetadata(issuer=AnyHttpUrl(base), authorization_endpoint=AnyHttpUrl(f"{base}/authorize"),
                             token_endpoint=AnyHttpUrl(f"{base}/token"), grant_types_supported=["client_credentials"],
                             token_endpoint_auth_methods_supported=["client_secret_basic"], scopes_supported=[SCOPE])
        return JSONResponse(meta.model_dump(by_alias=True, mode="json", exclude_none=True))

    @server.custom_route("/token", methods=["POST"])
    async def token(request: Request) -> JSONResponse:
        form = await request.form()
        creds = base64.b64decode(request.headers.get("authorization", "").removeprefix("Basic ")).decode()
        ok = form.get("grant_type") == "client_credentials" and creds == f"{CLIENT_ID}:{CLIENT_SECRET}"
        with open(token_log, "a") as f:
            f.write(f"{form.get('grant_type')} {'issued' if ok else 'refused'}\n")
        if not ok:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        access = f"access_{secrets.token_hex(16)}"
        issued[access] = AccessToken(token=access, client_id=CLIENT_ID, scopes=[SCOPE], expires_at=None)
        body = OAuthToken(access_token=access, token_type="Bearer", expires_in=3600, scope=SCOPE)
        return JSONResponse(body.model_dump(exclude_none=True), headers={"cache-control": "no-store"})

    return server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))


if __name__ == "__main__":
    assert sys.argv[1] == "--http"
    port = int(sys.argv[2])
    uvicorn.run(build(port, sys.argv[3]), host="127.0.0.1", port=port, log_level="warning")  # type: ignore[arg-type]
