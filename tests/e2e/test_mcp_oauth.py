"""MCP sign-in by discovery against the local stack in JWT mode: the official MCP Python
SDK's OAuth client meets /mcp's 401, reads the protected resource metadata it names,
finds the authorization server (a small one of the tests: tests/e2e/oauth_server.py,
what Cognito is to a deployed stack), registers, signs in with PKCE and calls a tool
with the token it got. The local stack plays API Gateway's JWT authorizer on every
other route (local_stack.authorizer), so the same token works there too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from local_stack.process import LocalStackProcess
from tests.e2e.conftest import start_stack, stop_stack
from tests.e2e.oauth_server import AuthorizationServer

#: the app client the stack's JwtAudience names (a token for it needs no resource)
APP_CLIENT = "app-client-e2e"


@pytest.fixture(scope="module")
def idp() -> Iterator[AuthorizationServer]:
    server = AuthorizationServer()
    http = server.start()
    yield server
    http.shutdown()


@pytest.fixture(scope="module")
def jwt_stack(idp: AuthorizationServer) -> Iterator[LocalStackProcess]:
    stack = start_stack(
        {
            "HARNESS_MODEL": "offline",
            "HARNESS_AUTH_MODE": "jwt",
            "HARNESS_JWT_ISSUER": idp.issuer,
            "HARNESS_JWT_AUDIENCE": APP_CLIENT,
        }
    )
    yield stack
    stop_stack(stack)


class Storage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The user's browser: follows the authorization URL to the redirect with the code
    (the test's authorization server signs the user in at once)."""

    def __init__(self) -> None:
        self.visited: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def open(self, url: str) -> None:
        self.visited.append(url)
        answer = httpx.get(url, follow_redirects=False)
        assert answer.status_code == 302, answer.text
        query = httpx.URL(answer.headers["location"]).params
        self.result = AuthorizationCodeResult(code=query["code"], state=query.get("state"))

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def test_the_mcp_sdk_signs_in_by_discovery_and_calls_a_tool(
    jwt_stack: LocalStackProcess, idp: AuthorizationServer
) -> None:
    url = f"{jwt_stack.url}/mcp"
    storage, browser = Storage(), Browser()
    metadata = OAuthClientMetadata(
        client_name="e2e agent",
        redirect_uris=["http://127.0.0.1:9/callback"],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    auth = OAuthClientProvider(url, metadata, storage, browser.open, browser.callback)

    async def scenario() -> tuple[Any, Any]:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as memory,
        ):
            saved = await memory.call_tool("memory_save", {"content": "- I take my tea with lemon"})
            found = await memory.call_tool("memory_read", {})
            return saved, found

    saved, found = asyncio.run(scenario())

    assert not saved.is_error and "tea with lemon" in found.content[0].text
    assert browser.visited and storage.tokens is not None
    # discovery, in the spec's order: the resource's metadata, then the issuer's
    assert ("GET", "/.well-known/oauth-authorization-server") in idp.seen
    assert ("POST", "/register") in idp.seen and ("POST", "/token") in idp.seen
    # the token it got is for the MCP endpoint (RFC 8707), and the memory is its user's:
    # the same user signed in through the app client reads it from the HTTP API
    bearer = {"authorization": f"Bearer {storage.tokens.access_token}"}
    app = {"authorization": f"Bearer {idp.mint(audience=APP_CLIENT, client_id=APP_CLIENT)}"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with httpx.Client(base_url=jwt_stack.url) as http:
        assert http.post("/mcp", json=ping, headers=bearer).status_code == 200
        assert "tea with lemon" in http.get("/v1/memory", headers=app).json()["content"]


def test_an_unsigned_request_is_told_where_to_sign_in(
    jwt_stack: LocalStackProcess, idp: AuthorizationServer
) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=jwt_stack.url) as http:
        refused = http.post("/mcp", json=ping, headers=accept)
        metadata_url = f"{jwt_stack.url}/.well-known/oauth-protected-resource/mcp"
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == (
            f'Bearer resource_metadata="{metadata_url}", scope="openid"'
        )
        document = http.get(metadata_url).json()
        assert document["resource"] == f"{jwt_stack.url}/mcp"
        assert document["authorization_servers"] == [idp.issuer]
        stack_wide = http.get("/.well-known/oauth-protected-resource").json()
        assert stack_wide["resource"] == jwt_stack.url

        forged = idp.mint(audience=APP_CLIENT, client_id=APP_CLIENT, lifetime=-3600)
        expired = http.post(
            "/mcp", json=ping, headers=accept | {"authorization": f"Bearer {forged}"}
        )
        assert expired.status_code == 401
        assert 'error="invalid_token"' in expired.headers["www-authenticate"]


def test_the_other_routes_are_guarded_as_api_gateway_guards_them(
    jwt_stack: LocalStackProcess, idp: AuthorizationServer
) -> None:
    token = idp.mint(audience=APP_CLIENT, client_id=APP_CLIENT)
    other = idp.mint(audience="someone-else", client_id="someone-else")
    with httpx.Client(base_url=jwt_stack.url) as http:
        assert http.get("/v1/memory").status_code == 401
        assert http.get("/v1/memory", headers={"authorization": f"Bearer {other}"}).json() == {
            "message": "Unauthorized"
        }
        mine = http.get("/v1/memory", headers={"authorization": f"Bearer {token}"})
        assert mine.status_code in (200, 404), mine.text
        assert http.get("/health").status_code == 200  # no authorizer on it
        # the X-User-Id header means nothing outside dev mode
        spoofed = http.get("/v1/memory", headers={"x-user-id": idp.user})
        assert spoofed.status_code == 401
