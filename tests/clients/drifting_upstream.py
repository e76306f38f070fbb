"""A test MCP upstream whose tool definitions change while it runs (issue 34: drift and rug
pulls), driven by tests/drift.rs. Built on the official MCP Python SDK's low-level server.

    python drifting_upstream.py --port PORT --tools FILE

FILE is a JSON array of tools in MCP wire shape (name, title, description, inputSchema,
annotations); it is read again on every tools/list, so a test changes a tool's description by
rewriting the file. tools/call answers "called NAME with ARGUMENTS" for a listed tool.
Listens on 127.0.0.1 only; prints "listening on 127.0.0.1:PORT" once it accepts connections.
"""

import argparse
import json
import socket
import sys
import threading
import time

import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tools", required=True)
    args = parser.parse_args()

    def read_tools() -> list[dict]:
        with open(args.tools, encoding="utf-8") as f:
            return json.load(f)

    async def list_tools(ctx, params):
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

    server = Server("drifting-upstream", version="1", on_list_tools=list_tools, on_call_tool=call_tool)
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
