// Lists the tools of the MCP servers installed from npm next to this script (package.json here),
// by starting each over stdio with the official TypeScript SDK and calling tools/list.
// Usage: node list_tools.mjs SERVERS_JSON OUT_JSON
//   SERVERS_JSON: [{"server", "package", "bin", "args": [...], "env": {...}}], bin relative to the
//   package's folder. Placeholder credentials only: nothing is called, only listed.
// Writes [{"server", "package", "version", "tools": [{name, title, description, inputSchema,
// annotations}]}] and prints one line per server to stderr. A server that fails to list is an
// error (exit 1): the corpus must be what the registry published.
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [serversPath, outPath] = process.argv.slice(2);
const servers = JSON.parse(readFileSync(serversPath, "utf8"));
const scratch = mkdtempSync(join(tmpdir(), "tool-corpus-"));

async function list(entry) {
  const folder = join(dirname(fileURLToPath(import.meta.url)), "node_modules", entry.package);
  const version = JSON.parse(readFileSync(join(folder, "package.json"), "utf8")).version;
  const args = [join(folder, entry.bin), ...(entry.args ?? []).map((a) => a.replace("$SCRATCH", scratch))];
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    env: { PATH: process.env.PATH, HOME: scratch, ...(entry.env ?? {}) },
    stderr: "ignore",
    cwd: scratch,
  });
  const client = new Client({ name: "toolplane-tool-corpus", version: "1.0.0" });
  const timer = new Promise((_, reject) => setTimeout(() => reject(new Error("no answer in 60 s")), 60000));
  try {
    await Promise.race([client.connect(transport), timer]);
    const tools = [];
    let cursor;
    do {
      const page = await Promise.race([client.listTools(cursor ? { cursor } : {}), timer]);
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return {
      server: entry.server,
      package: entry.package,
      version,
      tools: tools.map((t) => ({
        name: t.name,
        title: t.title ?? t.annotations?.title ?? null,
        description: t.description ?? "",
        inputSchema: t.inputSchema,
        annotations: t.annotations ?? null,
      })),
    };
  } finally {
    await client.close().catch(() => {});
  }
}

const results = await Promise.allSettled(servers.map(list));
let failed = false;
const out = [];
results.forEach((r, i) => {
  if (r.status === "fulfilled") {
    out.push(r.value);
    console.error(`${servers[i].server}: ${r.value.tools.length} tools (${servers[i].package}@${r.value.version})`);
  } else {
    failed = true;
    console.error(`${servers[i].server}: FAILED ${r.reason?.message ?? r.reason}`);
  }
});
writeFileSync(outPath, JSON.stringify(out, null, 1));
process.exit(failed ? 1 : 0);
