// Drives a Toolplane edge with the official MCP TypeScript SDK (@modelcontextprotocol/sdk).
// Usage: node ts_client.mjs URL KEY [CALLS_JSON]
// Prints one JSON object: negotiated protocol version, every tool name, per-call results.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, callsJson] = process.argv.slice(2);
const calls = callsJson ? JSON.parse(callsJson) : [];
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "toolplane-ts-test", version: "1.0.0" });
await client.connect(transport);
const out = { protocol_version: transport.protocolVersion ?? null, tools: [], calls: [] };
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  out.tools.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor);
for (const [name, args] of calls) {
  const progress = [];
  try {
    const result = await client.callTool({ name, arguments: args }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    out.calls.push({
      is_error: Boolean(result.isError),
      text: result.content?.[0]?.text ?? null,
      types: (result.content ?? []).map((c) => c.type),
      structured: result.structuredContent ?? null,
      progress,
    });
  } catch (error) {
    out.calls.push({ exception: String(error?.message ?? error) });
  }
}
await client.close();
console.log(JSON.stringify(out));
