// An MCP server built with the official TypeScript SDK that implements the conformance suite's
// tool scenarios (the same answers as the demo executor). The tests put it behind an edge as an
// MCP executor and run the suite's tool scenarios through the edge against it.
//
// Usage: node conformance_upstream.mjs PORT   (listens on 127.0.0.1 only; stateless)
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const empty = { type: "object", properties: {} };

const tools = {
  test_simple_text: async () => ({ content: [{ type: "text", text: "This is a simple text response for testing." }] }),
  test_image_content: async () => ({ content: [{ type: "image", data: PNG, mimeType: "image/png" }] }),
  test_audio_content: async () => ({ content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] }),
  test_embedded_resource: async () => ({
    content: [{ type: "resource", resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." } }],
  }),
  test_multiple_content_types: async () => ({
    content: [
      { type: "text", text: "Multiple content types test:" },
      { type: "image", data: PNG, mimeType: "image/png" },
      { type: "resource", resource: { uri: "test://mixed-content-resource", mimeType: "application/json", text: '{"test":"data","value":123}' } },
    ],
  }),
  test_tool_with_progress: async (extra) => {
    const token = extra._meta?.progressToken;
    for (const step of [0, 50, 100]) {
      if (token !== undefined) {
        await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: step, total: 100, message: `step ${step}` } });
      }
      await sleep(50);
    }
    return { content: [{ type: "text", text: "Progress test completed" }] };
  },
  test_tool_with_logging: async (extra) => {
    for (const message of ["Tool execution started", "Tool processing data", "Tool execution completed"]) {
      await extra.sendNotification({ method: "notifications/message", params: { level: "info", data: message } });
      await sleep(50);
    }
    return { content: [{ type: "text", text: "Logging test completed" }] };
  },
  test_error_handling: async () => ({ content: [{ type: "text", text: "This tool intentionally returns an error for testing" }], isError: true }),
};

function server() {
  const s = new Server({ name: "toolplane-conformance-upstream", version: "1.0.0" }, { capabilities: { tools: {}, logging: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.keys(tools).map((name) => ({ name, description: `Conformance tool ${name}`, inputSchema: empty })),
  }));
  s.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    // The W3C trace context each call arrives with, as an HTTP header and in _meta (SEP-414),
    // for the tracing test to read from this process's log.
    const trace = { tool: request.params.name, header: extra.requestInfo?.headers?.traceparent ?? null, meta: request.params._meta?.traceparent ?? null };
    console.error(`trace ${JSON.stringify(trace)}`);
    const tool = tools[request.params.name];
    if (!tool) {
      return { content: [{ type: "text", text: `unknown tool ${request.params.name}` }], isError: true };
    }
    return tool(extra);
  });
  return s;
}

const port = Number(process.argv[2]);
http
  .createServer(async (req, res) => {
    // Stateless: a server and a transport per request.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: false });
    const s = server();
    res.on("close", () => {
      transport.close();
      s.close();
    });
    await s.connect(transport);
    await transport.handleRequest(req, res);
  })
  .listen(port, "127.0.0.1", () => console.error(`conformance upstream on 127.0.0.1:${port}`));
