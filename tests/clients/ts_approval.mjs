// Calls tools that need approval through the official MCP TypeScript SDK, answering the edge's
// question (elicitation/create on the call's stream) with the SDK's request handler.
// Usage: node ts_approval.mjs URL KEY ANSWER CALLS_JSON
//   ANSWER: "approve", "decline", "cancel", or "none" (no elicitation capability declared)
// Prints one JSON object: negotiated protocol version, the questions asked, per-call results.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, key, answer, callsJson] = process.argv.slice(2);
const calls = JSON.parse(callsJson);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const capabilities = answer === "none" ? {} : { elicitation: {} };
const client = new Client({ name: "toolplane-ts-approval", version: "1.0.0" }, { capabilities });
const questions = [];
if (answer !== "none") {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    questions.push(request.params.message);
    if (answer === "approve") return { action: "accept", content: { approve: true } };
    return { action: answer };
  });
}
await client.connect(transport);
const out = { protocol_version: transport.protocolVersion ?? null, calls: [], questions };
for (const [name, args] of calls) {
  try {
    const result = await client.callTool({ name, arguments: args });
    out.calls.push({ is_error: Boolean(result.isError), text: result.content?.[0]?.text ?? null });
  } catch (error) {
    out.calls.push({ exception: String(error?.message ?? error) });
  }
}
await client.close();
console.log(JSON.stringify(out));
