// A test MCP upstream on the 2025 protocol generation whose tools change while it runs (issue
// 34: an upstream's list_changed on a 2025-11-25 session), driven by tests/drift.rs. Built on
// the official MCP TypeScript SDK v1 (which speaks up to 2025-11-25): a stateful Streamable
// HTTP server, one SDK server per session.
//   node legacy_upstream.mjs PORT TOOLS_FILE
// TOOLS_FILE is a JSON array of tools in MCP wire shape, read again on every tools/list. When
// it changes, every session is told (notifications/tools/list_changed on its GET stream).
// tools/call answers "called NAME with ARGUMENTS". Listens on 127.0.0.1 only; prints
// "listening on 127.0.0.1:PORT" once it accepts connections.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { readFileSync, watchFile } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [port, toolsFile] = process.argv.slice(2);
const readTools = () => JSON.parse(readFileSync(toolsFile, "utf8"));
const servers = new Set();
const transports = new Map();

function makeServer() {
  const server = new Server(
    { name: "legacy-drifting-upstream", version: "1" },
    { capabilities: { tools: { listChanged: true } } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: readTools() }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const args = JSON.stringify(request.params.arguments ?? {});
    return { content: [{ type: "text", text: `called ${request.params.name} with ${args}` }] };
  });
  return server;
}

watchFile(toolsFile, { interval: 100 }, () => {
  for (const server of servers) {
    server.sendToolListChanged().catch(() => {});
  }
});

http
  .createServer(async (req, res) => {
    const id = req.headers["mcp-session-id"];
    let transport = id ? transports.get(id) : undefined;
    if (!transport) {
      if (req.method !== "POST" || id) {
        res.writeHead(id ? 404 : 400).end();
        return;
      }
      const server = makeServer();
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sessionId) => transports.set(sessionId, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) transports.delete(transport.sessionId);
        servers.delete(server);
      };
      servers.add(server);
      await server.connect(transport);
    }
    await transport.handleRequest(req, res);
  })
  .listen(Number(port), "127.0.0.1", () => console.log(`listening on 127.0.0.1:${port}`));
