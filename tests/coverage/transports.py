"""Raw JSON-RPC MCP clients of the gateway: newline-delimited stdio, and Streamable HTTP
(POST with JSON or SSE answers, the GET stream for messages not tied to a request).
Raw on purpose: an SDK client cannot send arbitrary fields.

Both keep every line they read from the gateway (`seen`), so a step can ask whether a
marker reached the client in any message (result, error, notification, request)."""

import http.client
import json
import queue
import subprocess
import threading
import time
import urllib.parse


class Base:
    def __init__(self):
        self.q = queue.Queue()
        self.seen = []
        self.next_id = 0

    def _got(self, text):
        self.seen.append(text)
        try:
            self.q.put(json.loads(text))
        except ValueError:
            pass

    def request(self, method, params, answer=None, timeout=30.0):
        """Send a request; answer the gateway's own requests with answer(msg) -> dict
        {"result": …} or {"error": …} until ours is answered. Returns the response."""
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to {method}")
            try:
                msg = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if "method" in msg and "id" in msg:
                reply = answer(msg) if answer else {"error": {"code": -32601, "message": "no"}}
                self.send({"jsonrpc": "2.0", "id": msg["id"], **reply})
            elif msg.get("id") == rid and "method" not in msg:
                return msg

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def settle(self, secs):
        """Read what arrives within secs (late notifications)."""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            try:
                msg = self.q.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                break
            if "method" in msg and "id" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}})


class Stdio(Base):
    def __init__(self, argv, stderr):
        super().__init__()
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        for line in self.p.stdout:
            self._got(line.decode("utf-8", "replace").rstrip("\n"))

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


class Http(Base):
    def __init__(self, url):
        super().__init__()
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.path = u.hostname, u.port, u.path
        self.session = None
        self.version = None
        self.get_started = False

    def _headers(self):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        if self.version:
            h["MCP-Protocol-Version"] = self.version
        return h

    def _read_sse(self, resp):
        data = []
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif line == "":
                if data:
                    text = "\n".join(data)
                    if text:
                        self._got(text)
                data = []

    def _post(self, msg):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        conn.request("POST", self.path, body=json.dumps(msg), headers=self._headers())
        resp = conn.getresponse()
        sid = resp.getheader("Mcp-Session-Id")
        if sid and not self.session:
            self.session = sid
        ctype = resp.getheader("Content-Type") or ""
        if "text/event-stream" in ctype:
            self._read_sse(resp)
        else:
            body = resp.read().decode("utf-8", "replace")
            if body.strip():
                self._got(body)
        conn.close()

    def send(self, msg):
        if msg.get("method") == "initialize":
            self._post(msg)  # the session id comes with this answer
            return
        threading.Thread(target=self._post, args=(msg,), daemon=True).start()
        if not self.get_started and self.session and msg.get("method") == "notifications/initialized":
            self.get_started = True
            threading.Thread(target=self._get, daemon=True).start()

    def _get(self):
        try:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=3600)
            h = self._headers()
            h["Accept"] = "text/event-stream"
            del h["Content-Type"]
            conn.request("GET", self.path, headers=h)
            resp = conn.getresponse()
            if resp.status == 200:
                self._read_sse(resp)
        except OSError:
            pass

    def close(self):
        if self.session:
            try:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=5)
                conn.request("DELETE", self.path, headers=self._headers())
                conn.getresponse().read()
            except OSError:
                pass
