"""Drives a Toolplane edge with the official MCP Python SDK (PyPI `mcp`).

Usage: python_client.py URL KEY MODE [CALLS_JSON]
  MODE: "legacy" (initialize handshake) or "auto" (server/discover, 2026-07-28 when offered)
  CALLS_JSON: [[tool, arguments], ...]
Prints one JSON object: negotiated protocol version, every tool name (all pages), and per call
isError, the first text block, structuredContent, progress values seen, or the exception text.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main() -> None:
    url, key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    calls = json.loads(sys.argv[4]) if len(sys.argv) > 4 else []
    out: dict = {}
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            out["protocol_version"] = client.protocol_version
            names: list[str] = []
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                names.extend(tool.name for tool in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            out["tools"] = names
            results = []
            for name, arguments in calls:
                progress: list[float] = []

                async def on_progress(value, total=None, message=None, _seen=progress):
                    _seen.append(value)

                try:
                    result = await client.call_tool(name, arguments, progress_callback=on_progress)
                    first = result.content[0] if result.content else None
                    results.append(
                        {
                            "is_error": bool(result.is_error),
                            "text": getattr(first, "text", None),
                            "types": [block.type for block in result.content],
                            "structured": result.structured_content,
                            "progress": progress,
                        }
                    )
                except Exception as error:  # noqa: BLE001 - report every failure to the test
                    results.append({"exception": str(error)})
            out["calls"] = results
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
