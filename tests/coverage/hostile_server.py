"""A hostile MCP server, driven by tests/coverage/run.py: over stdio (newline-delimited
JSON-RPC), or with --http PORT_FILE over Streamable HTTP (it writes its URL there; an
answer that carries messages before it is an SSE stream, the client's answers to its
requests arrive as POSTs).

argv: INIT_FILE CONTROL_FILE RECEIVED_FILE [--http PORT_FILE]

- `initialize` is answered with the InitializeResult in INIT_FILE (every position of it
  holding a marker; the capabilities declare everything the gateway relays).
- Every other request re-reads CONTROL_FILE: {"method": M, "result": R} or
  {"method": M, "error": E} answers the next request of method M with R/E (once), and
  "before": [messages] are sent first: notifications as given, server requests
  (sampling, elicitation, roots, …) sent and their answers awaited. "$TOKEN" in a
  message is the progress token of the request being answered.
- Every line received is appended to RECEIVED_FILE (what reached the server).
- Anything else gets a benign default answer.
"""

import json
import sys
import time

import queue
import threading

INIT, CONTROL, RECEIVED = sys.argv[1], sys.argv[2], sys.argv[3]
HTTP = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--http" else None
rec = open(RECEIVED, "a", encoding="utf-8")
rec_lock = threading.Lock()
out = sys.stdout


def record(line):
    with rec_lock:
        rec.write(line if line.endswith("\n") else line + "\n")
        rec.flush()


def send(msg):
    out.write(json.dumps(msg) + "\n")
    out.flush()


def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    record(line)
    try:
        return json.loads(line)
    except ValueError:
        return None


def default(method, params):
    if method == "tools/list":
        return {"tools": [{"name": "probe", "description": "Returns a note.", "inputSchema": {"type": "object"}}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "ok"}]}
    if method == "prompts/list":
        return {"prompts": [{"name": "probe", "description": "A note."}]}
    if method == "prompts/get":
        return {"messages": [{"role": "user", "content": {"type": "text", "text": "ok"}}]}
    if method == "resources/list":
        return {"resources": [{"uri": "file:///probe.txt", "name": "probe"}]}
    if method == "resources/templates/list":
        return {"resourceTemplates": []}
    if method == "resources/read":
        return {"contents": [{"uri": (params or {}).get("uri", "file:///probe.txt"), "text": "ok"}]}
    if method == "completion/complete":
        return {"completion": {"values": ["ok"]}}
    return {}


def control():
    try:
        with open(CONTROL, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def clear():
    with open(CONTROL, "w", encoding="utf-8") as f:
        f.write("{}")


def subst(v, token):
    if v == "$TOKEN":
        return token
    if isinstance(v, dict):
        return {k: subst(x, token) for k, x in v.items()}
    if isinstance(v, list):
        return [subst(x, token) for x in v]
    return v


pending = []  # requests read while awaiting an answer to our own request
ours = 0


def await_stdio(rid):
    while True:
        got = read()
        if got is None:
            continue
        if got.get("id") == rid and "method" not in got:
            return
        pending.append(got)


def answer(msg, send=send, await_answer=await_stdio):
    global ours
    method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
    if method == "initialize":
        with open(INIT, encoding="utf-8") as f:
            result = json.load(f)
        if result.get("protocolVersion") == "$ECHO":  # the version the gateway offers
            result["protocolVersion"] = params.get("protocolVersion")
        send({"jsonrpc": "2.0", "id": rid, "result": result})
        return
    c = control()
    if c.get("method") == method:
        clear()
        token = (params.get("_meta") or {}).get("progressToken", 0)
        for m in c.get("before", []):
            m = subst(m, token)
            if "id" in m:
                ours += 1
                m = {**m, "id": f"srv-{ours}"}
                send(m)
                await_answer(m["id"])
            else:
                send(m)
                time.sleep(0.05)  # let the gateway relay it before the answer
        if "error" in c:
            send({"jsonrpc": "2.0", "id": rid, "error": c["error"]})
        else:
            send({"jsonrpc": "2.0", "id": rid, "result": c.get("result", default(method, params))})
        return
    send({"jsonrpc": "2.0", "id": rid, "result": default(method, params)})


def serve_http(port_file):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answers = {}  # id of our request -> queue of the client's answer
    lock = threading.Lock()  # one answer at a time, as over stdio

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_DELETE(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
            record(body)
            try:
                msg = json.loads(body)
            except ValueError:
                msg = None
            if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
                if isinstance(msg, dict) and msg.get("id") in answers:
                    answers[msg["id"]].put(msg)
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if msg.get("method") == "initialize" or control().get("method") != msg.get("method"):
                frames = []
                answer(msg, send=frames.append, await_answer=lambda rid: None)
                data = json.dumps(frames[-1]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if msg.get("method") == "initialize":
                    self.send_header("Mcp-Session-Id", "hostile-session")
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()

            def event(m):
                if "id" in m and "method" in m:
                    answers[m["id"]] = queue.Queue()
                self.wfile.write(b"data: " + json.dumps(m).encode() + b"\n\n")
                self.wfile.flush()

            def wait(rid):
                try:
                    answers[rid].get(timeout=30)
                finally:
                    answers.pop(rid, None)

            with lock:
                answer(msg, send=event, await_answer=wait)
            self.close_connection = True

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    with open(port_file + ".tmp", "w") as f:
        f.write(f"http://127.0.0.1:{srv.server_address[1]}/mcp")
    import os

    os.replace(port_file + ".tmp", port_file)
    srv.serve_forever()


if HTTP:
    serve_http(HTTP)
else:
    while True:
        msg = pending.pop(0) if pending else read()
        if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
            continue
        answer(msg)
