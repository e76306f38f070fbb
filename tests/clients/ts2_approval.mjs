// Calls tools that need approval through the official MCP TypeScript SDK v2
// (@modelcontextprotocol/client), which speaks 2026-07-28: the edge answers with an
// input-required result, the SDK's driver asks the elicitation handler and retries with the
// answer and the sealed requestState. Requests go to the edges in turn (a round-robin fetch), so
// the retry lands on another edge than the one that asked.
// Usage: node ts2_approval.mjs KEY ANSWER CALLS_JSON URL [URL...]
//   ANSWER: "approve", "decline", "cancel", or "none" (no elicitation capability declared)
// Prints one JSON object: negotiated protocol version, the questions asked, the edge each
// request went to, per-call results.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [key, answer, callsJson, ...urls] = process.argv.slice(2);
const calls = JSON.parse(callsJson);
const requests = [];
let turn = 0;
const roundRobin = async (_url, init) => {
  const target = urls[turn++ % urls.length];
  const body = typeof init?.body === "string" ? JSON.parse(init.body) : null;
  requests.push({ edge: urls.indexOf(target), method: body?.method ?? null });
  return fetch(target, init);
};
const transport = new StreamableHTTPClientTransport(new URL(urls[0]), {
  fetch: roundRobin,
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const capabilities = answer === "none" ? {} : { elicitation: {} };
const client = new Client(
  { name: "toolplane-ts2-approval", version: "1.0.0" },
  { capabilities, versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
const questions = [];
if (answer !== "none") {
  client.setRequestHandler("elicitation/create", async (request) => {
    questions.push(request.params.message);
    if (answer === "approve") return { action: "accept", content: { approve: true } };
    return { action: answer };
  });
}
await client.connect(transport);
const out = {
  protocol_version: client.getNegotiatedProtocolVersion?.() ?? null,
  calls: [],
  questions,
  requests,
};
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
