"""The MCP conformance suite's client program, written with ``MCPConnector`` (as a user would).

The suite runs ``python tests/mcp/connector_conformance_client.py <server-url>`` with the scenario in
``MCP_CONFORMANCE_SCENARIO``, its data in ``MCP_CONFORMANCE_CONTEXT`` and the protocol revision in
``MCP_CONFORMANCE_PROTOCOL_VERSION``. Each scenario does what the SDK's own conformance client does
(``sdk_conformance_client.py``), through the connector: tools listed by ``connector.tools()``, called
through an ``Executor`` whose fork workers reach the session over the connector's relay, OAuth through
``toolfork.mcp.auth``, elicitation and sampling through the connector's callbacks.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlparse

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.mcp import MCPConnector
from toolfork.mcp.auth import InMemoryTokenStorage, authorization_code, client_credentials

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
log = logging.getLogger("conformance-client")

PROTOCOL_VERSION = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
REDIRECT_URI = "http://localhost:3000/callback"


def protocol() -> str:
    """'auto' on a 2026-07-28 leg (discover, then the per-request envelope), 'legacy' before it."""
    if PROTOCOL_VERSION is None or PROTOCOL_VERSION in MODERN_PROTOCOL_VERSIONS:
        return "auto"
    return "legacy"


def context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(raw) if raw else {}


def elicit_defaults(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept, filling in the defaults of the requested schema (SEP-1034). A plain function on
    purpose: the connector runs it in a thread of its own."""
    content: dict[str, Any] = {}
    if isinstance(params, types.ElicitRequestFormParams):
        for name, prop in params.requested_schema.get("properties", {}).items():
            if "default" in prop:
                content[name] = prop["default"]
    return types.ElicitResult(action="accept", content=content)


async def sample_stub(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=""),
                                     model="conformance-stub")


async def roots_stub(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


def call(connector: MCPConnector, calls: list[tuple[str, dict[str, Any]]], strict: bool = True) -> list[ToolResult]:
    """The calls through a fork-pool executor, as an agent makes them."""
    with Executor([connector], workers=2, timeout=45) as executor:
        results = executor.run([ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)])
    for result in results:
        log.info("%s -> %s %s", result.name, result.status, result.output.as_text() if result.output else result.error)
        if strict and not result.ok:
            raise SystemExit(f"{result.name} failed: {result.error}")
    return results


def stub_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    by_type = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": [], "null": None}
    properties = schema.get("properties", {})
    return {name: by_type.get(properties.get(name, {}).get("type"), "x") for name in schema.get("required", [])}


class BrowserStandIn:
    """The user's browser: follows the authorization URL and keeps the code the redirect carries."""

    def __init__(self) -> None:
        self.query: dict[str, list[str]] = {}

    async def redirect(self, url: str) -> None:
        import httpx2

        async with httpx2.AsyncClient() as http:
            response = await http.get(url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RuntimeError(f"expected a redirect from {url}, got {response.status_code}")
        self.query = parse_qs(urlparse(location).query)
        if "code" not in self.query:
            raise RuntimeError(f"no authorization code in the redirect to {location}")

    async def callback(self) -> Any:
        from mcp.shared.auth import AuthorizationCodeResult

        q, self.query = self.query, {}
        return AuthorizationCodeResult(code=q["code"][0], state=(q.get("state") or [None])[0],
                                       iss=(q.get("iss") or [None])[0])


async def enterprise_auth(url: str, ctx: dict[str, Any]) -> Any:
    """SEP-990 (ID-JAG): no shortcut in toolfork.mcp.auth; the SDK's provider is passed as auth= as it is."""
    import httpx2
    from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
    from mcp.client.auth.utils import build_protected_resource_metadata_discovery_urls

    prm_url = build_protected_resource_metadata_discovery_urls(None, url)[0]
    async with httpx2.AsyncClient(timeout=30.0) as http:
        issuer = (await http.get(prm_url)).raise_for_status().json()["authorization_servers"][0]

    async def fetch_id_jag(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient(timeout=30.0) as http:
            response = await http.post(ctx["idp_token_endpoint"], data={
                "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                "subject_token": ctx["idp_id_token"], "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                "audience": audience, "resource": resource, "client_id": ctx["idp_client_id"]})
            return str(response.raise_for_status().json()["access_token"])

    return IdentityAssertionOAuthProvider(server_url=url, storage=InMemoryTokenStorage(), client_id=ctx["client_id"],
                                          client_secret=ctx["client_secret"], issuer=issuer,
                                          assertion_provider=fetch_id_jag,
                                          token_endpoint_auth_method="client_secret_basic")


def auth_for(scenario: str, url: str) -> Any:
    ctx = context()
    if scenario == "auth/client-credentials-jwt":
        return client_credentials(url, ctx["client_id"], private_key_pem=ctx["private_key_pem"],
                                  signing_algorithm=ctx.get("signing_algorithm", "ES256"))
    if scenario == "auth/client-credentials-basic":
        return client_credentials(url, ctx["client_id"], ctx["client_secret"])
    if scenario in ("auth/enterprise-managed-authorization", "auth/cross-app-access-complete-flow"):
        import asyncio

        return asyncio.run(enterprise_auth(url, ctx))
    storage = InMemoryTokenStorage()
    if ctx.get("client_id"):  # pre-registered client
        import asyncio

        from mcp.shared.auth import OAuthClientInformationFull

        secret = ctx.get("client_secret")
        asyncio.run(storage.set_client_info(OAuthClientInformationFull.model_validate({
            "client_id": ctx["client_id"], "client_secret": secret, "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "client_secret_basic" if secret else "none"})))
    browser = BrowserStandIn()
    return authorization_code(url, redirect_handler=browser.redirect, callback_handler=browser.callback,
                              redirect_uris=[REDIRECT_URI], client_name="conformance-client", storage=storage,
                              client_metadata_url="https://conformance-test.local/client-metadata.json")


def run(scenario: str, url: str) -> None:
    if scenario.startswith("auth/"):
        with MCPConnector(url=url, auth=auth_for(scenario, url), protocol=protocol(),
                          elicitation=elicit_defaults) as connector:
            tools = connector.tools()
            log.info("listed %s", [t.name for t in tools])
            if tools:
                call(connector, [(tools[0].name, {})], strict=False)
        return
    mode = "legacy" if scenario == "json-schema-ref-no-deref" else protocol()  # that mock speaks the handshake only
    callbacks: dict[str, Any] = {}
    if scenario == "request-metadata":
        callbacks = {"sampling": sample_stub, "roots": roots_stub, "elicitation": elicit_defaults}
    elif scenario == "elicitation-sep1034-client-defaults":
        callbacks = {"elicitation": elicit_defaults}
    elif scenario == "sep-2322-client-request-state":
        callbacks = {"elicitation": lambda ctx, params: types.ElicitResult(action="accept",
                                                                            content={"confirmed": True})}
    with MCPConnector(url=url, protocol=mode, **callbacks) as connector:
        tools = {t.name: t for t in connector.tools()}
        log.info("listed %s", sorted(tools))
        if scenario == "tools_call":
            call(connector, [("add_numbers", {"a": 5, "b": 3})])
        elif scenario == "request-metadata":  # its mock lists no tools: the executor refuses the call itself
            call(connector, [("add_numbers", {"a": 5, "b": 3})], strict=False)
        elif scenario == "sse-retry":
            call(connector, [("test_reconnection", {})])
        elif scenario == "elicitation-sep1034-client-defaults":
            call(connector, [("test_client_elicitation_defaults", {})])
        elif scenario == "sep-2322-client-request-state":
            mrtr = ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type")
            for name in mrtr:
                call(connector, [(name, {})])  # one after another, as the scenario expects them
        elif scenario == "json-schema-2020-12-preservation":
            focal = tools["json_schema_2020_12_tool"]
            call(connector, [("json_schema_echo", {"schema": focal.input_schema})])  # type: ignore[attr-defined]
        elif scenario in ("http-invalid-tool-headers", "http-standard-headers"):  # every tool it lists
            call(connector, [(name, stub_arguments(t.input_schema)) for name, t in tools.items()],  # type: ignore[attr-defined]
                 strict=False)
        elif scenario == "http-custom-headers":
            wanted = [(c["name"], c.get("arguments") or {}) for c in context().get("toolCalls", [])]
            for name, args in wanted:
                if name in tools:
                    call(connector, [(name, args)], strict=False)
        elif scenario not in ("initialize", "json-schema-ref-no-deref"):
            raise SystemExit(f"unknown scenario {scenario!r}")


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} <server-url>")
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO") or "auth/metadata-default"
    log.info("scenario %s at %s (protocol %s -> %s)", scenario, sys.argv[-1], PROTOCOL_VERSION, protocol())
    run(scenario, sys.argv[-1])


if __name__ == "__main__":
    main()
