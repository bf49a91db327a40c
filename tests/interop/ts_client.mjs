#!/usr/bin/env node
// MCP client driver on the TypeScript SDK (@modelcontextprotocol/sdk), for the gateway's
// interop tests. Same CLI and output shape as py_client.py:
//
//   node ts_client.mjs [OPTIONS] --stdio -- CMD ARGS...
//   node ts_client.mjs [OPTIONS] --http http://127.0.0.1:PORT/mcp
//
// Options: --call TOOL [--args JSON] (repeatable), --calls JSON (a list of
// {"tool", "args"}), --read URI (repeatable), --prompt NAME [--prompt-args JSON]
// (repeatable), --timeout SECONDS (default 30), --progress, --sampling-reply TEXT,
// --no-sampling, --no-elicitation (do not declare the capability).
//
// Prints ONE JSON object on stdout. Exit 0 when the session ran to the end (isError
// results and JSON-RPC error answers to single requests are recorded, not failures); 1
// when connecting, initializing or listing fails ("fatal") or the connection is lost
// midway ("connection_lost": true; error code -32000 or "Not connected"); 2 on a usage
// error. Run it with the node from .interop (>= 22) or any
// node >= 18; it resolves the SDK from .interop/node_modules.

import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const interopRoot = process.env.PORTCULLIS_INTEROP_DIR
  ? resolve(process.env.PORTCULLIS_INTEROP_DIR)
  : resolve(here, "..", "..", ".interop");
const requireFrom = createRequire(join(interopRoot, "package.json"));
const sdk = async (path) => import(pathToFileURL(requireFrom.resolve(`@modelcontextprotocol/sdk/${path}`)).href);

const DEFAULT_SAMPLING_REPLY = "This is the fixed sampling reply of the portcullis test client.";

function usage(msg) {
  process.stderr.write(`ts_client.mjs: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const sep = argv.indexOf("--");
  const command = sep >= 0 ? argv.slice(sep + 1) : [];
  const opts = argv.slice(0, sep >= 0 ? sep : argv.length);
  const o = { stdio: false, http: null, calls: [], reads: [], prompts: [], timeout: 30, progress: false, samplingReply: DEFAULT_SAMPLING_REPLY, sampling: true, elicitation: true };
  const json = (flag, s) => {
    try {
      return JSON.parse(s);
    } catch (e) {
      usage(`${flag}: invalid JSON: ${e.message}`);
    }
  };
  for (let i = 0; i < opts.length; i++) {
    const a = opts[i];
    const next = () => {
      if (i + 1 >= opts.length) usage(`${a} needs a value`);
      return opts[++i];
    };
    switch (a) {
      case "--stdio": o.stdio = true; break;
      case "--http": o.http = next(); break;
      case "--call": o.calls.push({ tool: next(), args: {} }); break;
      case "--args": {
        if (!o.calls.length) usage("--args must follow a --call");
        o.calls[o.calls.length - 1].args = json(a, next());
        break;
      }
      case "--calls": {
        const list = json(a, next());
        if (!Array.isArray(list) || !list.every((c) => c && typeof c.tool === "string")) usage('--calls must be a JSON list of {"tool": NAME, "args": {...}}');
        for (const c of list) o.calls.push({ tool: c.tool, args: c.args ?? c.arguments ?? {} });
        break;
      }
      case "--read": o.reads.push(next()); break;
      case "--prompt": o.prompts.push({ name: next(), args: {} }); break;
      case "--prompt-args": {
        if (!o.prompts.length) usage("--prompt-args must follow a --prompt");
        o.prompts[o.prompts.length - 1].args = json(a, next());
        break;
      }
      case "--timeout": o.timeout = Number(next()); break;
      case "--progress": o.progress = true; break;
      case "--sampling-reply": o.samplingReply = next(); break;
      case "--no-sampling": o.sampling = false; break;
      case "--no-elicitation": o.elicitation = false; break;
      case "--mode": next(); break; // accepted for CLI parity with py_client.py; this SDK always uses initialize
      case "-h": case "--help": process.stdout.write(readmeUsage()); process.exit(0);
      default: usage(`unknown option ${a}`);
    }
  }
  if (o.stdio === !!o.http) usage("exactly one of --stdio -- CMD... or --http URL is required");
  if (o.stdio && !command.length) usage("--stdio needs a command after --");
  return { o, command };
}

function readmeUsage() {
  return "usage: ts_client.mjs [--call TOOL [--args JSON]]... [--calls JSON] [--read URI]... [--prompt NAME [--prompt-args JSON]]... [--timeout S] [--progress] [--no-sampling] [--no-elicitation] (--stdio -- CMD ARGS... | --http URL)\n";
}

const errText = (e) => `${e?.name ?? "Error"}: ${e?.message ?? String(e)}`;
const CONNECTION_CLOSED = -32000;

async function main() {
  const { o, command } = parseArgs(process.argv.slice(2));
  const { Client } = await sdk("client/index.js");
  const types = await sdk("types.js");
  const out = {
    client: "typescript-sdk",
    transport: o.stdio ? "stdio" : "http",
    protocol_version: null,
    server_info: null,
    capabilities: null,
    instructions: null,
    tools: [], prompts: [], resources: [], templates: [],
    calls: [], reads: [], prompt_results: [],
    sampling_requests: [], elicitation_requests: [], notifications: [], errors: [],
    connection_lost: false,
  };
  const recordError = (entry, e) => {
    entry.error = errText(e);
    entry.error_code = typeof e?.code === "number" ? e.code : null;
    if (entry.error_code === CONNECTION_CLOSED || e?.message === "Not connected") out.connection_lost = true;
  };
  const capabilities = {};
  if (o.sampling) capabilities.sampling = {};
  if (o.elicitation) capabilities.elicitation = { form: {} };
  const client = new Client({ name: "portcullis-ts-client", version: "1.0.0" }, { capabilities });
  if (o.sampling) {
    client.setRequestHandler(types.CreateMessageRequestSchema, async (req) => {
      out.sampling_requests.push(req.params);
      return { role: "assistant", content: { type: "text", text: o.samplingReply }, model: "portcullis-fixed-reply", stopReason: "endTurn" };
    });
  }
  if (o.elicitation) {
    client.setRequestHandler(types.ElicitRequestSchema, async (req) => {
      out.elicitation_requests.push(req.params);
      return { action: "decline" };
    });
  }
  client.fallbackNotificationHandler = async (n) => { out.notifications.push(n); };
  client.onerror = (e) => { out.errors.push(`transport: ${errText(e)}`); };

  let transport;
  if (o.stdio) {
    const { StdioClientTransport } = await sdk("client/stdio.js");
    transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" });
  } else {
    const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
    transport = new StreamableHTTPClientTransport(new URL(o.http));
  }

  // The SDK tells the transport the negotiated version through this optional hook.
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => {
    out.protocol_version = v;
    setVersion?.(v);
  };

  let status = 0;
  const reqOpts = { timeout: o.timeout * 1000 };
  try {
    await client.connect(transport, reqOpts);
    out.server_info = client.getServerVersion() ?? null;
    const caps = client.getServerCapabilities() ?? {};
    out.capabilities = caps;
    out.instructions = client.getInstructions() ?? null;
    if (caps.tools) out.tools = (await client.listTools(undefined, reqOpts)).tools;
    if (caps.prompts) out.prompts = (await client.listPrompts(undefined, reqOpts)).prompts;
    if (caps.resources) {
      out.resources = (await client.listResources(undefined, reqOpts)).resources;
      out.templates = (await client.listResourceTemplates(undefined, reqOpts)).resourceTemplates;
    }
    for (const c of o.calls) {
      const entry = { tool: c.tool, args: c.args, result: null, error: null, error_code: null };
      const callOpts = { ...reqOpts };
      if (o.progress) {
        callOpts.onprogress = (p) => out.notifications.push({ method: "notifications/progress", params: p });
        callOpts.resetTimeoutOnProgress = true;
      }
      try {
        entry.result = await client.callTool({ name: c.tool, arguments: c.args }, undefined, callOpts);
      } catch (e) {
        recordError(entry, e);
      }
      out.calls.push(entry);
    }
    for (const uri of o.reads) {
      const entry = { uri, result: null, error: null, error_code: null };
      try { entry.result = await client.readResource({ uri }, reqOpts); } catch (e) { recordError(entry, e); }
      out.reads.push(entry);
    }
    for (const p of o.prompts) {
      const entry = { name: p.name, args: p.args, result: null, error: null, error_code: null };
      const args = Object.fromEntries(Object.entries(p.args).map(([k, v]) => [k, String(v)]));
      try { entry.result = await client.getPrompt({ name: p.name, arguments: args }, reqOpts); } catch (e) { recordError(entry, e); }
      out.prompt_results.push(entry);
    }
    // Give late notifications (e.g. tools/list_changed after a call) a moment to arrive.
    await new Promise((r) => setTimeout(r, 200));
  } catch (e) {
    out.fatal = errText(e);
    status = 1;
  }
  if (out.connection_lost) status = 1;
  try { await client.close(); } catch (e) { out.errors.push(`close: ${errText(e)}`); }
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(status));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ client: "typescript-sdk", fatal: errText(e), errors: [String(e?.stack ?? e)] }) + "\n", () => process.exit(1));
});
