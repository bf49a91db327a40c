#!/usr/bin/env node
// One scripted session of the real-server suite on the TypeScript SDK
// (@modelcontextprotocol/sdk from .interop/node_modules).
//
//   node ts_session.mjs SPEC.json
//
// SPEC: {"command": [...], "env": {...}, "cwd": DIR, "timeout": SECONDS,
//        "steps": [["call", TOOL, ARGS] | ["read", URI] | ["prompt", NAME, ARGS], ...]}
// Prints ONE JSON transcript on stdout (the shape run.py's Python client writes):
// init, tools, resources, templates, prompts, list_errors, steps, sampling_requests,
// elicitation_requests, fatal. Exit 0 when the session ran to its end, 1 otherwise.

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const interopRoot = process.env.PORTCULLIS_INTEROP_DIR
  ? resolve(process.env.PORTCULLIS_INTEROP_DIR)
  : resolve(here, "..", "..", ".interop");
const requireFrom = createRequire(join(interopRoot, "package.json"));
const sdk = async (path) => import(pathToFileURL(requireFrom.resolve(`@modelcontextprotocol/sdk/${path}`)).href);

const SAMPLING_REPLY = "The grey heron.";
const errText = (e) => `${e?.name ?? "Error"}: ${e?.message ?? String(e)}`;

async function listAll(fn, key, opts) {
  const items = [];
  let cursor;
  for (let page = 0; page < 50; page++) {
    const r = await fn(cursor ? { cursor } : undefined, opts);
    items.push(...(r[key] ?? []));
    if (!r.nextCursor) break;
    cursor = r.nextCursor;
  }
  return items;
}

async function main() {
  const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const { Client } = await sdk("client/index.js");
  const { StdioClientTransport } = await sdk("client/stdio.js");
  const types = await sdk("types.js");
  const out = {
    client: "typescript-sdk", init: null, tools: [], resources: [], templates: [], prompts: [],
    list_errors: {}, steps: [], sampling_requests: [], elicitation_requests: [], fatal: null,
  };
  const client = new Client(
    { name: "portcullis-real-servers", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: { form: {} } } },
  );
  client.setRequestHandler(types.CreateMessageRequestSchema, async (req) => {
    out.sampling_requests.push(req.params);
    return { role: "assistant", content: { type: "text", text: SAMPLING_REPLY }, model: "fixed-reply", stopReason: "endTurn" };
  });
  client.setRequestHandler(types.ElicitRequestSchema, async (req) => {
    out.elicitation_requests.push(req.params);
    return { action: "decline" };
  });
  const transport = new StdioClientTransport({
    command: spec.command[0], args: spec.command.slice(1), env: spec.env, cwd: spec.cwd, stderr: "pipe",
  });
  // Drain the server's stderr (kept out of the transcript).
  transport.stderr?.on("data", () => {});
  let version = null;
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => { version = v; setVersion?.(v); };
  const opts = { timeout: (spec.timeout ?? 30) * 1000 };
  let status = 0;
  try {
    await client.connect(transport, opts);
    const caps = client.getServerCapabilities() ?? {};
    out.init = { protocol_version: version, server_info: client.getServerVersion() ?? null, capabilities: caps, instructions: client.getInstructions() ?? null };
    const list = async (name, fn, key) => {
      try { out[name] = await listAll(fn, key, opts); } catch (e) { out.list_errors[name] = errText(e); }
    };
    if (caps.tools) await list("tools", (p, o) => client.listTools(p, o), "tools");
    if (caps.resources) {
      await list("resources", (p, o) => client.listResources(p, o), "resources");
      await list("templates", (p, o) => client.listResourceTemplates(p, o), "resourceTemplates");
    }
    if (caps.prompts) await list("prompts", (p, o) => client.listPrompts(p, o), "prompts");
    for (const step of spec.steps) {
      const [kind, name, args] = step;
      const entry = { kind, name, args: args ?? null, result: null, error: null };
      try {
        if (kind === "call") entry.result = await client.callTool({ name, arguments: args }, undefined, opts);
        else if (kind === "read") entry.result = await client.readResource({ uri: name }, opts);
        else if (kind === "prompt") {
          const a = Object.fromEntries(Object.entries(args ?? {}).map(([k, v]) => [k, String(v)]));
          entry.result = await client.getPrompt({ name, arguments: a }, opts);
        }
      } catch (e) {
        entry.error = { code: typeof e?.code === "number" ? e.code : null, message: e?.message ?? String(e) };
      }
      out.steps.push(entry);
    }
  } catch (e) {
    out.fatal = errText(e);
    status = 1;
  }
  try { await client.close(); } catch { /* closing a dead transport */ }
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(status));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ client: "typescript-sdk", fatal: errText(e) }) + "\n", () => process.exit(1));
});
