"""A test MCP upstream whose tool definitions change while it runs (issue 34: drift and rug
pulls), driven by tests/drift.rs. Built on the official MCP Python SDK's low-level server.

    python drifting_upstream.py --port PORT --tools FILE

FILE is a JSON array of tools in MCP wire shape (name, title, description, inputSchema,
annotations); it is read again on every tools/list, so a test changes a tool's description by
rewriting the file. When the file changes, the server announces it to every 2026-07-28
`subscriptions/listen` stream (notifications/tools/list_changed), as a server whose tools
change should. tools/call answers "called NAME with ARGUMENTS" for a listed tool.
Listens on 127.0.0.1 only; prints "listening on 127.0.0.1:PORT" once it accepts connections.
"""

import argparse
import asyncio
import json
import os
import socket
import sys
import threading
import time

import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tools", required=True)
    args = parser.parse_args()

    def read_tools() -> list[dict]:
        with open(args.tools, encoding="utf-8") as f:
            return json.load(f)

    bus = InMemorySubscriptionBus()
    listen = ListenHandler(bus)
    watchers: list[asyncio.Task] = []

    async def watch_file() -> None:
        last = os.stat(args.tools).st_mtime_ns
        while True:
            await asyncio.sleep(0.1)
            try:
                now = os.stat(args.tools).st_mtime_ns
            except OSError:
                continue
            if now != last:
                last = now
                await bus.publish(ToolsListChanged())

    def ensure_watcher() -> None:
        # Started in the server's own event loop, on the first request.
        if not watchers:
            watchers.append(asyncio.get_running_loop().create_task(watch_file()))

    async def on_listen(ctx, params):
        ensure_watcher()
        return await listen(ctx, params)

    async def list_tools(ctx, params):
        ensure_watcher()
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in read_tools()])

    async def call_tool(ctx, params):
        if params.name not in {t["name"] for t in read_tools()}:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"unknown tool {params.name}")],
                is_error=True,
            )
        arguments = json.dumps(params.arguments or {}, separators=(",", ":"), sort_keys=True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"called {params.name} with {arguments}")]
        )

    server = Server(
        "drifting-upstream",
        version="1",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=on_listen,
    )
    app = server.streamable_http_app(json_response=True, stateless_http=True)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")

    def announce() -> None:
        while True:
            try:
                socket.create_connection(("127.0.0.1", args.port), timeout=0.2).close()
                print(f"listening on 127.0.0.1:{args.port}", flush=True)
                return
            except OSError:
                time.sleep(0.05)

    threading.Thread(target=announce, daemon=True).start()
    uvicorn.Server(config).run()


if __name__ == "__main__":
    sys.exit(main())
