"""Calls tools that need approval through the official MCP Python SDK (PyPI `mcp`), answering
the edge's question with the SDK's elicitation callback.

Usage: python_approval.py KEY MODE ANSWER CALLS_JSON URL [URL ...]
  MODE: "legacy" (initialize handshake, 2025-11-25) or "auto" (2026-07-28)
  ANSWER: "approve", "decline", "cancel", "accept-without-approving", or "none" (no elicitation
          callback: the client declares no elicitation capability)
  CALLS_JSON: [[tool, arguments], ...]
  URL: one or more edges; the HTTP requests go to them in turn (request 1 to the first, 2 to
       the second, ...), so that a 2026-07-28 retry lands on another edge than its first round.
Prints one JSON object: the negotiated protocol version, the questions asked (message), the
edges each request went to, and per call isError and the first text block (or the exception).
"""

import asyncio
import json
import sys

import httpx2 as httpx
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


class RoundRobin(httpx.AsyncBaseTransport):
    """Sends each request to the next edge in turn."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = [httpx.URL(url) for url in urls]
        self.inner = httpx.AsyncHTTPTransport()
        self.turn = 0
        self.sent: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = self.urls[self.turn % len(self.urls)]
        self.turn += 1
        request.url = request.url.copy_with(host=target.host, port=target.port)
        request.headers["host"] = f"{target.host}:{target.port}"
        self.sent.append(f"{request.method} {target.port}")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def main() -> None:
    key, mode, answer, calls_json = sys.argv[1:5]
    urls = sys.argv[5:]
    calls = json.loads(calls_json)
    questions: list[str] = []

    async def on_elicit(context, params):  # noqa: ANN001 - the SDK's callback signature
        questions.append(params.message)
        if answer == "approve":
            return types.ElicitResult(action="accept", content={"approve": True})
        if answer == "accept-without-approving":
            return types.ElicitResult(action="accept", content={"approve": False})
        return types.ElicitResult(action=answer)

    transport = RoundRobin(urls)
    http = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx.Timeout(30, read=300),
        transport=transport,
    )
    out: dict = {}
    callback = None if answer == "none" else on_elicit
    async with http:
        async with Client(
            streamable_http_client(urls[0], http_client=http), mode=mode, elicitation_callback=callback
        ) as client:
            out["protocol_version"] = client.protocol_version
            results = []
            for name, arguments in calls:
                try:
                    result = await client.call_tool(name, arguments)
                    first = result.content[0] if result.content else None
                    results.append({"is_error": bool(result.is_error), "text": getattr(first, "text", None)})
                except Exception as error:  # noqa: BLE001 - report every failure to the test
                    results.append({"exception": str(error)})
            out["calls"] = results
    out["questions"] = questions
    out["sent"] = transport.sent
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
