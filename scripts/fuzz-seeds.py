#!/usr/bin/env python3
"""Seed inputs for the fuzz targets, from the project's own files only.

Writes fuzz/seeds/<target>/ (not committed): texts and tool objects of corpus/
(all project-authored), tests/probes and demo/; the client-config fixtures of
crates/portcullis-clientconfig/tests/fixtures; JSON-RPC messages (stdio lines,
HTTP bodies, SSE streams) built around those texts and tools. `scripts/fuzz.sh
--seed` merges them into the committed, minimized corpora fuzz/corpus/<target>/.

The first byte of each input is the target's mode byte (see
crates/portcullis-fuzz/src/targets/*.rs). Deterministic: same files, same seeds.
"""
import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "seeds")
PER_TARGET = 150  # inputs per kind of source, at most
MAX_TEXT = 2000  # bytes: longer texts are left out (the corpora stay small)


def records():
    """Every record of the project's corpus, probes and demo inputs."""
    paths = [os.path.join(ROOT, "corpus", "corpus.jsonl"),
             os.path.join(ROOT, "tests", "probes", "floors.jsonl"),
             os.path.join(ROOT, "demo", "demo.jsonl")]
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def sample(items, n):
    """Every k-th item, so the sample spans the whole list."""
    if len(items) <= n:
        return items
    k = len(items) / n
    return [items[int(i * k)] for i in range(n)]


def write(target, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode()


def main():
    texts, tools, args = [], [], []
    for r in records():
        if isinstance(r.get("tool"), dict):
            tools.append(r["tool"])
            continue
        text = r.get("text")
        if not isinstance(text, str):
            continue
        if r.get("channel") == "tool_definition":
            try:
                t = json.loads(text)
                if isinstance(t, dict):
                    tools.append(t)
                    continue
            except ValueError:
                pass
        if r.get("channel") == "tool_arguments":
            try:
                a = json.loads(text)
                if isinstance(a, dict):
                    args.append(a)
            except ValueError:
                pass
        if len(text.encode()) <= MAX_TEXT:
            texts.append(text)
    tools = [t for t in tools if len(dumps(t)) <= MAX_TEXT]
    texts, tools, args = sample(texts, PER_TARGET), sample(tools, PER_TARGET), sample(args, 100)

    # normalize: the text itself.
    for t in texts:
        write("normalize", t.encode())
    # decode: the text under a few cap settings (mode byte: depth, bytes, segments).
    for i, t in enumerate(texts):
        write("decode", bytes([(44, 43, 19, 172)[i % 4]]) + t.encode())
    # tool_definition: tool objects (even mode), results and messages (odd mode).
    for t in tools:
        write("tool_definition", b"\x00" + dumps(t))
    for i, t in enumerate(texts[:60]):
        result = {"content": [{"type": "text", "text": t}], "isError": False}
        write("tool_definition", bytes([1 + 2 * (i % 12)]) + dumps(result))
    write("tool_definition", b"\x0d" + dumps({"contents": [
        {"uri": "file:///a.png", "mimeType": "image/png", "blob": "iVBORw0KGgo="},
        {"uri": "file:///b.txt", "mimeType": "text/plain", "text": texts[0]}]}))

    # JSON-RPC messages, client to server and server to client.
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}},
        "clientInfo": {"name": "seed", "version": "1"}}}
    client = [init,
              {"jsonrpc": "2.0", "method": "notifications/initialized"},
              {"jsonrpc": "2.0", "id": 1, "method": "ping"},
              {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "c1"}},
              {"jsonrpc": "2.0", "id": 3, "method": "server/discover"},
              {"jsonrpc": "2.0", "id": "r", "method": "resources/read", "params": {"uri": "file:///x"}},
              {"jsonrpc": "2.0", "id": 4, "result": {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}},
              {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}]
    for i, a in enumerate(args):
        client.append({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                       "params": {"name": "t", "arguments": a, "_meta": {"progressToken": i}}})
    server = [{"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}},
                                                      "serverInfo": {"name": "seed", "version": "1"}, "instructions": texts[1]}},
              {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
              {"jsonrpc": "2.0", "id": 5, "method": "sampling/createMessage", "params": {
                  "messages": [{"role": "user", "content": {"type": "text", "text": texts[2]}}], "maxTokens": 10}},
              {"jsonrpc": "2.0", "id": 6, "error": {"code": -32601, "message": "no"}}]
    for i in range(0, len(tools), 3):
        server.append({"jsonrpc": "2.0", "id": 2, "result": {"tools": tools[i:i + 3], "nextCursor": "n"}})
    for i, t in enumerate(texts[:40]):
        server.append({"jsonrpc": "2.0", "id": 10 + i, "result": {"content": [{"type": "text", "text": t}]}})

    # jsonrpc_stdio: a few lines per input (mode: direction, chunk size, line bound).
    for n, (msgs, base) in enumerate(((client, 0x00), (server, 0x80))):
        for i in range(0, len(msgs), 3):
            lines = [dumps(m) for m in msgs[i:i + 3]]
            sep = b"\r\n" if i % 2 else b"\n"
            body = sep.join(lines) + sep
            if i % 5 == 0:
                body = b"\xef\xbb\xbf" + body
            write("jsonrpc_stdio", bytes([base | (i % 16)]) + body)
        write("jsonrpc_stdio", bytes([base | 0x30]) + dumps(msgs[0]) + b"\n" + dumps(msgs[-1]) + b"\n")
    # jsonrpc_http: a POST body (mode 0), a JSON answer (1), an SSE answer (2).
    for m in client:
        write("jsonrpc_http", b"\x00" + dumps(m))
    for m in server:
        write("jsonrpc_http", b"\x01" + dumps(m))
    for i in range(0, len(server), 2):
        events = b"".join(b"id: %d\nevent: message\ndata: %s\n\n" % (j, dumps(m)) for j, m in enumerate(server[i:i + 2]))
        write("jsonrpc_http", bytes([2 + 3 * (i % 30)]) + b"retry: 3000\n: keep-alive\n\n" + events)
    write("jsonrpc_http", b"\x05" + b"event: endpoint\ndata: /m\r\n\r\ndata: {\"jsonrpc\":\r\ndata: \"2.0\",\"method\":\"notifications/tools/list_changed\"}\r\n\r\n")

    # clientconfig: each fixture as its own format (mode = index in PATHS).
    paths = ["claude-desktop/claude_desktop_config.json", "claude-code/project/.mcp.json",
             "claude-code/.claude.json", "cursor/.cursor/mcp.json", "vscode/.vscode/mcp.json",
             "vscode-settings/settings.json", "windsurf/mcp_config.json", "list/servers.json"]
    fixtures = os.path.join(ROOT, "crates", "portcullis-clientconfig", "tests", "fixtures")
    for i, p in enumerate(paths):
        with open(os.path.join(fixtures, p), "rb") as f:
            write("clientconfig", bytes([i]) + f.read())
    with open(os.path.join(fixtures, "vscode-settings-dotted", "settings.json"), "rb") as f:
        write("clientconfig", bytes([5]) + f.read())
    for t in os.listdir(OUT):
        print(f"{t}: {len(os.listdir(os.path.join(OUT, t)))} seeds", file=sys.stderr)


if __name__ == "__main__":
    main()
