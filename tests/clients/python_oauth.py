"""Connects to a Toolplane edge with the official MCP Python SDK's OAuth client (PyPI `mcp`):
no key, so the edge answers 401 with its protected-resource metadata, and the SDK discovers the
authorization server, registers itself (RFC 7591), runs the authorization-code flow with PKCE
and a resource indicator, and retries with the access token.

Usage: python_oauth.py URL LOGIN [TOOL ARGUMENTS_JSON]
  LOGIN: the account the test's provider logs in (sent as login_hint; see idp.mjs).
Prints one JSON object: protocol version, tool names, the call's result (or the exception), the
access token and its claims (for the test to replay and inspect).
"""

import asyncio
import base64
import json
import sys
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

REDIRECT_URI = "http://127.0.0.1:53682/callback"


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info) -> None:
        self.client_info = client_info


def claims_of(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


async def main() -> None:
    url, login = sys.argv[1], sys.argv[2]
    call = (sys.argv[3], json.loads(sys.argv[4])) if len(sys.argv) > 4 else None
    redirected: dict = {}

    async def user_agent(authorization_url: str) -> None:
        # What a browser does: follow the provider's redirects (it logs LOGIN in and grants
        # consent at once) until it sends the user back to the client's redirect URI.
        sep = "&" if "?" in authorization_url else "?"
        location = f"{authorization_url}{sep}{urlencode({'login_hint': login})}"
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
            for _ in range(20):
                response = await browser.get(location)
                if response.status_code not in (302, 303, 307):
                    raise RuntimeError(
                        f"provider answered {response.status_code}: {response.text[:300]}"
                    )
                location = urljoin(location, response.headers["location"])
                if location.startswith(REDIRECT_URI):
                    query = parse_qs(urlparse(location).query)
                    redirected.update({k: v[0] for k, v in query.items()})
                    return
        raise RuntimeError("too many redirects")

    async def callback() -> AuthorizationCodeResult:
        if "code" not in redirected:
            raise RuntimeError(f"authorization failed: {redirected}")
        return AuthorizationCodeResult(
            code=redirected["code"], state=redirected.get("state"), iss=redirected.get("iss")
        )

    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="toolplane oauth test",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=user_agent,
        callback_handler=callback,
    )
    out: dict = {}
    http = create_mcp_http_client(auth=auth)
    try:
        async with http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                out["protocol_version"] = client.protocol_version
                page = await client.list_tools(cache_mode="refresh")
                out["tools"] = [tool.name for tool in page.tools]
                if call:
                    result = await client.call_tool(call[0], call[1])
                    first = result.content[0] if result.content else None
                    out["call"] = {"is_error": bool(result.is_error), "text": getattr(first, "text", None)}
    except Exception as error:  # noqa: BLE001 - report every failure to the test
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        out["exception"] = f"{type(error).__name__}: {error}"
    if storage.tokens is not None:
        out["access_token"] = storage.tokens.access_token
        out["claims"] = claims_of(storage.tokens.access_token)
    if storage.client_info is not None:
        out["client_id"] = storage.client_info.client_id
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
