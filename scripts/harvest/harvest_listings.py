#!/usr/bin/env python3
"""Install pinned MCP server packages into a scratch dir, start each over stdio and
list everything it offers; write corpus/harvest/*.jsonl and MANIFEST.json.

    python3 scripts/harvest/harvest_listings.py --scratch /work/harvest-scratch

Phases (each can be rerun alone; install is skipped for what is already installed):
  install  npm packages in chunks into <scratch>/npm/cNN with --ignore-scripts (a chunk
           that fails is split until the failing package is alone); each PyPI package
           into its own venv <scratch>/py/<name> with uv (hard links from one cache).
  list     start each server (timeout), JSON-RPC over stdio: initialize, then
           tools/list, prompts/list, resources/list, resources/templates/list with
           cursors; raw responses go to <scratch>/listings/<key>.json. A server that
           fails and names environment variables on stderr is retried once with
           obviously fake placeholder values for them (recorded in the manifest).
  write    turn the listings into corpus records (dedupe exact duplicates across
           packages, first kept) and the manifest.

Nothing here talks to anything but the package registries (installs) and the child
processes' stdio. Servers that need network or real credentials to list fail and are
recorded with the reason.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OUT = ROOT / "corpus" / "harvest"
PROTOCOL = "2025-06-18"
FAKE = "placeholder-not-a-real-credential"
MAX_PAGES = 20
# Dependencies are resolved as the registries stood when the package lists were made,
# so a rerun installs the same trees (npm --before, uv --exclude-newer).
BEFORE = "2026-12-01T22:18:00Z"
MAX_RESOURCES = 200  # per package: dynamic resource lists can be long

CHANNEL_FILES = {
    "tool_definition": "tool_definition.jsonl",
    "server_instructions": "server_instructions.jsonl",
    "prompt": "prompt.jsonl",
    "resource": "resource.jsonl",
}


def key_of(p: dict) -> str:
    return f"{p['ecosystem']}:{p['package']}"


def safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def load_packages(args) -> list[dict]:
    pk = json.loads((HERE / "packages.json").read_text())["packages"]
    ov = json.loads((HERE / "overrides.json").read_text()) if (HERE / "overrides.json").exists() else {}
    for p in pk:
        p.update(ov.get(key_of(p), {}))
    if args.only:
        pk = [p for p in pk if key_of(p) in set(args.only)]
    if getattr(args, "reverse", False):
        pk = pk[::-1]
    if args.limit:
        pk = pk[: args.limit]
    return pk


# ----------------------------------------------------------------------------- install


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def npm_install(pkgs: list[dict], scratch: Path, status: dict, done=lambda group, d: None) -> None:
    todo = [p for p in pkgs if p["ecosystem"] == "npm" and key_of(p) not in status]
    base = scratch / "npm"
    base.mkdir(parents=True, exist_ok=True)
    n = 0

    def attempt(group: list[dict]) -> None:
        nonlocal n
        # Unique per run, so two runs at once (see --status) never share a prefix.
        d = base / f"c{os.getpid()}-{n:03d}"
        n += 1
        d.mkdir()
        (d / "package.json").write_text('{"name":"harvest-chunk","private":true}\n')
        specs = [f"{p['package']}@{p['version']}" for p in group]
        t = time.time()
        r = run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund",
                 "--legacy-peer-deps", "--omit=dev", f"--before={BEFORE}", "--prefix", str(d), *specs],
                timeout=1200)
        print(f"npm install {len(group)} -> {d.name}: rc={r.returncode} {time.time()-t:.0f}s",
              file=sys.stderr, flush=True)
        if r.returncode == 0:
            for p in group:
                status[key_of(p)] = {"installed": str(d)}
            done(group, d)
            return
        if len(group) == 1:
            err = [l for l in r.stderr.splitlines() if "ERR" in l][:3]
            status[key_of(group[0])] = {"install_error": " | ".join(err)[:400] or r.stderr[-400:]}
            shutil.rmtree(d, ignore_errors=True)
            done(group, None)
            return
        shutil.rmtree(d, ignore_errors=True)
        half = len(group) // 2
        attempt(group[:half])
        attempt(group[half:])

    i = 0
    while i < len(todo):
        # Another run at the same time may have listed some of these already.
        group = [p for p in todo[i : i + 16] if not (scratch / "listings" / f"{safe(key_of(p))}.json").exists()]
        i += 16
        if group:
            attempt(group)


def py_install(pkgs: list[dict], scratch: Path, status: dict, uv: str, done=lambda group, d: None) -> None:
    env = {**os.environ, "UV_CACHE_DIR": str(scratch / "uv-cache"), "UV_LINK_MODE": "hardlink",
           "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "UV_NATIVE_TLS": "1",
           "UV_PYTHON_DOWNLOADS": "never", "UV_EXCLUDE_NEWER": BEFORE}
    for p in pkgs:
        if p["ecosystem"] != "pypi" or key_of(p) in status:
            continue
        d = scratch / "py" / safe(p["package"])
        t = time.time()
        for python in [sys.executable, None]:
            if python is None:  # the package asked for a newer Python: take one that fits
                python = pick_python(r.stderr)
                if python is None:
                    break
            r, constraint = py_install_one(p, d, python, uv, env, scratch)
            if r.returncode == 0 or "does not satisfy Python" not in r.stderr:
                break
        print(f"uv install {p['package']}: rc={r.returncode} {time.time()-t:.0f}s",
              file=sys.stderr, flush=True)
        if r.returncode == 0:
            status[key_of(p)] = {"installed": str(d), "constraint": constraint,
                                 "python": Path(python).parent.parent.name}
            done([p], d)
        else:
            msg = " ".join(r.stderr.split())
            status[key_of(p)] = {"install_error": msg[:400]}
            shutil.rmtree(d, ignore_errors=True)
            done([p], None)


PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"


def pick_python(stderr: str) -> str | None:
    """The newest interpreter under pyenv that meets `Python>=3.X(,<3.Y)` in uv's
    resolver message."""
    m = re.search(r"does not satisfy Python>=3\.(\d+)(?:\.\d+)*(?:,\s*<3\.(\d+))?", stderr)
    if not m:
        return None
    lo, hi = int(m.group(1)), int(m.group(2) or 99)
    found = []
    for v in PYENV.glob("3.*"):
        minor = int(v.name.split(".")[1])
        exe = v / "bin" / "python3"
        if lo <= minor < hi and exe.exists():
            found.append((minor, str(exe)))
    return max(found)[1] if found else None


def py_install_one(p, d, python, uv, env, scratch):
    r = run([uv, "venv", "-q", "--clear", "--python", python, str(d)], env=env)
    if r.returncode != 0:
        return r, None
    # Most of these servers were written against the 1.x SDK and ask for `mcp>=1.x`
    # with no upper bound; mcp 2.x renamed FastMCP, so a resolver left alone breaks
    # them. Ask for mcp<2 first, and leave it free when that has no solution (a server
    # that needs 2.x).
    cf_ = scratch / "mcp-lt-2.txt"
    cf_.write_text("mcp<2\n")
    spec = f"{p['package']}=={p['version']}"
    py = str(d / "bin" / "python")
    r = run([uv, "pip", "install", "-q", "--python", py, "-c", str(cf_), spec], env=env, timeout=900)
    if r.returncode == 0:
        return r, "mcp<2"
    if "No solution found" in r.stderr and "does not satisfy Python" not in r.stderr:
        r = run([uv, "pip", "install", "-q", "--python", py, spec], env=env, timeout=900)
    return r, None


# ------------------------------------------------------------------------ start command


def npm_command(p: dict, where: Path) -> list[str] | None:
    pj = where / "node_modules" / p["package"] / "package.json"
    if not pj.exists():
        return None
    meta = json.loads(pj.read_text())
    b = meta.get("bin")
    if isinstance(b, str):
        rel = b
    elif isinstance(b, dict) and b:
        names = list(b)
        if p.get("bin"):
            rel = b[p["bin"]]
        else:
            best = [n for n in names if "mcp" in n.lower()] or names
            rel = b[best[0]]
    else:
        return None
    return ["node", str((pj.parent / rel).resolve())]


def py_command(p: dict, venv: Path) -> list[str] | None:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "d = m.distribution(sys.argv[1])\n"
        "print(json.dumps([e.name for e in d.entry_points if e.group == 'console_scripts']))"
    )
    r = run([str(venv / "bin" / "python"), "-c", code, p["package"]])
    if r.returncode != 0:
        return None
    names = json.loads(r.stdout)
    if p.get("bin"):
        names = [p["bin"]]
    if not names:
        return None
    want = re.sub(r"[-_.]+", "-", p["package"]).lower()
    names.sort(key=lambda n: (re.sub(r"[-_.]+", "-", n).lower() != want, "mcp" not in n.lower(), len(n)))
    return [str(venv / "bin" / names[0])]


# ------------------------------------------------------------------------------ listing


class Rpc:
    def __init__(self, cmd, env, cwd, timeout):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=cwd,
                                     start_new_session=True)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ, "out")
        self.sel.register(self.proc.stderr, selectors.EVENT_READ, "err")
        self.buf = b""
        self.err = b""
        self.next_id = 1
        self.timeout = timeout

    def send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None, timeout: float | None = None):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        deadline = time.time() + (timeout or self.timeout)
        while time.time() < deadline:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    m = json.loads(line)
                except ValueError:
                    continue  # a server printing logs to stdout
                if not isinstance(m, dict):
                    continue
                if m.get("id") == rid and ("result" in m or "error" in m):
                    return m
                if "method" in m and "id" in m:  # a request from the server: decline
                    self.send({"jsonrpc": "2.0", "id": m["id"],
                               "error": {"code": -32601, "message": "not supported"}})
            for k, _ in self.sel.select(timeout=max(0.05, deadline - time.time())):
                chunk = os.read(k.fileobj.fileno(), 65536)
                if not chunk:
                    self.sel.unregister(k.fileobj)
                    if k.data == "out":
                        raise EOFError("server closed stdout")
                    continue
                if k.data == "out":
                    self.buf += chunk
                else:
                    self.err = (self.err + chunk)[-20000:]
            if self.proc.poll() is not None and b"\n" not in self.buf and not self.sel.get_map():
                raise EOFError(f"server exited with {self.proc.returncode}")
        raise TimeoutError(f"no answer to {method} in {timeout or self.timeout:.0f}s")

    def close(self):
        try:
            os.killpg(self.proc.pid, 9)
        except OSError:
            pass
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


def paged(rpc: Rpc, method: str, field: str) -> tuple[list, str | None]:
    items, cursor = [], None
    for _ in range(MAX_PAGES):
        m = rpc.request(method, {"cursor": cursor} if cursor else {})
        if "error" in m:
            return items, f"{m['error'].get('code')}: {str(m['error'].get('message'))[:200]}"
        res = m["result"] or {}
        items += res.get(field) or []
        cursor = res.get("nextCursor")
        if not cursor:
            break
    return items, None


def list_once(cmd, env, cwd, timeout) -> dict:
    rpc = Rpc(cmd, env, cwd, timeout)
    try:
        init = rpc.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "portcullis-harvest", "version": "0.1"}})
        if "error" in init:
            raise RuntimeError(f"initialize error: {init['error']}")
        rpc.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        res = init["result"]
        caps = res.get("capabilities") or {}
        out = {"protocolVersion": res.get("protocolVersion"), "serverInfo": res.get("serverInfo"),
               "instructions": res.get("instructions"), "capabilities": caps, "errors": {}}
        for method, field, cap in [("tools/list", "tools", "tools"),
                                   ("prompts/list", "prompts", "prompts"),
                                   ("resources/list", "resources", "resources"),
                                   ("resources/templates/list", "resourceTemplates", "resources")]:
            if cap not in caps:
                out[field] = []
                continue
            try:
                out[field], err = paged(rpc, method, field)
            except TimeoutError as e:
                out[field], err = [], str(e)
            if err:
                out["errors"][method] = err
        return out
    finally:
        rpc.close()
        out_err = rpc.err.decode(errors="replace")
        list_once.last_stderr = out_err


ENV_NAME = re.compile(r"\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_KEY|KEY|TOKEN|SECRET|URL|ID|"
                      r"PASSWORD|HOST|USER|USERNAME|EMAIL|DOMAIN|PROJECT|REGION|ENDPOINT|PATH|"
                      r"DIR|ORG|WORKSPACE|SITE|ACCOUNT|BASE_URL|SERVER|APP_ID|CLIENT_ID|"
                      r"CLIENT_SECRET|PORT|DATABASE|DB))\b")


def fake_value(name: str, data: Path) -> str:
    if name.endswith(("_URL", "_HOST", "_ENDPOINT", "_SERVER", "_DOMAIN", "_SITE")):
        return "http://127.0.0.1:9"  # loopback discard port: a refused connection
    if name.endswith(("_PATH", "_DIR")):
        return str(data)
    if name.endswith("_PORT"):
        return "9"
    if name.endswith("_EMAIL"):
        return "placeholder@example.invalid"
    return FAKE


def list_package(p: dict, scratch: Path, status: dict, timeout: float) -> dict:
    k = key_of(p)
    st = status.get(k, {})
    if "installed" not in st:
        return {"status": "failed", "reason": "install: " + st.get("install_error", "not installed")}
    where = Path(st["installed"])
    cmd = npm_command(p, where) if p["ecosystem"] == "npm" else py_command(p, where)
    if not cmd:
        return {"status": "failed", "reason": "no executable (bin / console script) to start"}
    cmd = cmd + [a.replace("{data}", str(scratch / "data")) for a in p.get("args", [])]
    home = scratch / "home" / safe(k)
    home.mkdir(parents=True, exist_ok=True)
    (scratch / "data").mkdir(exist_ok=True)
    base_env = {"PATH": f"{where / 'bin'}:{os.environ['PATH']}", "HOME": str(home),
                "LANG": "C.UTF-8", "NODE_ENV": "production", "NO_COLOR": "1",
                "PYTHONUNBUFFERED": "1"}
    placeholder = {n: v.replace("{data}", str(scratch / "data")) for n, v in p.get("env", {}).items()}
    tried = []
    for attempt in range(2):
        env = {**base_env, **placeholder}
        t = time.time()
        try:
            listing = list_once(cmd, env, str(scratch / "data"), timeout)
            listing.update({"status": "listed", "command": shown(cmd, scratch),
                            "constraint": st.get("constraint"), "python": st.get("python"),
                            "placeholder_env": sorted(placeholder), "seconds": round(time.time() - t, 1)})
            return listing
        except (TimeoutError, EOFError, RuntimeError, OSError, BrokenPipeError) as e:
            err = list_once.last_stderr
            tried.append(f"{type(e).__name__}: {e}")
            names = {n for n in ENV_NAME.findall(err) if n not in placeholder and n not in base_env}
            if attempt == 0 and names:
                placeholder.update({n: fake_value(n, scratch / "data") for n in sorted(names)[:12]})
                continue
            tail = " ".join(err.split())[-300:]
            return {"status": "failed", "reason": "; ".join(tried) + (f"; stderr: {tail}" if tail else ""),
                    "command": shown(cmd, scratch), "placeholder_env": sorted(placeholder)}
    return {"status": "failed", "reason": "; ".join(tried)}


def shown(cmd: list[str], scratch: Path) -> list[str]:
    return [c.replace(str(scratch), "<scratch>") for c in cmd]


list_once.last_stderr = ""


# ------------------------------------------------------------------------------- write


CJK = re.compile(r"[\u4e00-\u9fff]")
KANA = re.compile(r"[\u3040-\u30ff]")
HANGUL = re.compile(r"[\uac00-\ud7af]")
CYR = re.compile(r"[\u0400-\u04ff]")
MD = re.compile(r"(```|^#{1,6} |\*\*|^\s*[-*] |^\s*\d+\. |\[[^\]]+\]\([^)]+\)|`[^`]+`)", re.M)


def language(text: str) -> str:
    if KANA.search(text):
        return "ja"
    if HANGUL.search(text):
        return "ko"
    n = max(1, len(text))
    if len(CJK.findall(text)) / n > 0.05:
        return "zh"
    if len(CYR.findall(text)) / n > 0.2:
        return "ru"
    return "en"


def register(text: str) -> str:
    if MD.search(text):
        return "markdown"
    if len(text) < 60 and "\n" not in text.strip():
        return "terse"
    return "plain"


def tool_prose(tool: dict) -> str:
    parts = [str(tool.get("description") or "")]

    def walk(s):
        if isinstance(s, dict):
            if isinstance(s.get("description"), str):
                parts.append(s["description"])
            for v in s.values():
                walk(v)
        elif isinstance(s, list):
            for v in s:
                walk(v)

    walk(tool.get("inputSchema"))
    return "\n".join(x for x in parts if x)


def prompt_text(pr: dict) -> str:
    lines = [str(pr.get("title") or pr.get("name") or "")]
    if pr.get("description"):
        lines.append(str(pr["description"]))
    for a in pr.get("arguments") or []:
        d = f": {a['description']}" if a.get("description") else ""
        lines.append(f"- {a.get('name')}{' (required)' if a.get('required') else ''}{d}")
    return "\n".join(l for l in lines if l)


def valid_tool(t) -> bool:
    """What crates/portcullis-eval/src/harvest.rs check_tool accepts."""
    return (isinstance(t, dict) and isinstance(t.get("name"), str) and bool(t["name"])
            and isinstance(t.get("inputSchema"), dict)
            and all(f not in t or isinstance(t[f], str) for f in ("description", "title"))
            and all(f not in t or isinstance(t[f], dict) for f in ("outputSchema", "annotations")))


def own_prose(o: dict) -> str:
    return str(o.get("description") or o.get("title") or o.get("name") or "")


def resource_text(r: dict) -> str:
    lines = [str(r.get("title") or r.get("name") or "")]
    if r.get("uriTemplate"):
        lines.append(str(r["uriTemplate"]))
    if r.get("description"):
        lines.append(str(r["description"]))
    return "\n".join(l for l in lines if l)


def split_of(lineage_group: str) -> str:
    """The corpus builder's split (crates/portcullis-eval/src/corpus.rs, split_of):
    60/20/20 by a hash of the lineage group. Written to the manifest for reading; the
    CI test checks it against the Rust function."""
    h = hashlib.sha256(f"split-v1\0{lineage_group}".encode()).digest()
    b = int.from_bytes(h[:8], "little") % 100
    return "train" if b < 60 else "dev" if b < 80 else "test"


FAILURE_KINDS = [  # first match wins; read from the recorded reason
    ("install: needs a Python this machine lacks", r"install: .*does not satisfy Python"),
    ("install: npm or uv error", r"^install: "),
    ("no executable: a library, not a server", r"no executable"),
    ("needs a newer Node.js than 20", r"(?i)requires Node\.js|Node\.js \d+ or later"),
    ("needs arguments, a subcommand or a config file",
     r"(?i)(usage:|required option|arguments are required|not provided|config file|--help|specify|"
     r"required command|credentials file|Missing required|is required|cannot be empty|first argument|"
     r"--[a-z-]+ strings|Filtering Logic|binary may be missing)"),
    ("needs real credentials or a reachable service",
     r"(?i)(api[_ ]?key|token|credential|unauthori[sz]ed|not reachable|ECONNREFUSED|connect|"
     r"Name or service not known|getaddrinfo|ENOTFOUND|must be set|network|login|oauth)"),
    ("crashed on start: missing module or incompatible dependency",
     r"(?i)(MODULE_NOT_FOUND|ImportError|ModuleNotFoundError|Cannot find|SyntaxError|GLIBC|"
     r"ERR_|TypeError|AttributeError|Traceback|Module\._load|ModuleJob\.run|node:internal|"
     r"RuntimeError|ValueError|needs FastMCP|status: 128)"),
    ("no answer to initialize within the timeout", r"TimeoutError"),
    ("exited without a reason on stderr", r"EOFError"),
]


def failure_kind(reason: str) -> str:
    for kind, pat in FAILURE_KINDS:
        if re.search(pat, reason):
            return kind
    return "other"


def write_corpus(pkgs: list[dict], scratch: Path) -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    seen: dict[tuple, str] = {}
    files = {c: [] for c in CHANNEL_FILES}
    dups = {c: 0 for c in CHANNEL_FILES}
    manifest_pkgs = []
    for p in pkgs:
        k = key_of(p)
        src = f"{k}@{p['version']}"
        lf = scratch / "listings" / f"{safe(k)}.json"
        entry = {"ecosystem": p["ecosystem"], "package": p["package"], "version": p["version"],
                 "selected_by": p.get("selected_by")}
        if any(p.get(f) for f in ("args", "env", "bin")):
            entry["start_override"] = {f: p[f] for f in ("args", "env", "bin", "note") if p.get(f)}
        if not lf.exists():
            entry.update(status="not_attempted", reason="the run was stopped before this package")
            manifest_pkgs.append(entry)
            continue
        lst = json.loads(lf.read_text())
        entry["status"] = lst["status"]
        for f in ("reason", "command", "placeholder_env", "constraint", "python", "seconds"):
            if lst.get(f) is not None:
                entry[f] = lst[f]
        if lst["status"] != "listed":
            entry["failure_kind"] = failure_kind(lst.get("reason", ""))
            manifest_pkgs.append(entry)
            continue
        entry["server_info"] = lst.get("serverInfo")
        entry["protocol_version"] = lst.get("protocolVersion")
        if lst.get("errors"):
            entry["list_errors"] = lst["errors"]
        items = []
        if isinstance(lst.get("instructions"), str) and lst["instructions"].strip():
            items.append(("server_instructions", {"text": lst["instructions"]}, "initialize.instructions", lst["instructions"]))
        invalid = 0
        for i, t in enumerate(lst.get("tools") or []):
            if not valid_tool(t):
                invalid += 1  # not an MCP tool object: the corpus loader would refuse it
                continue
            items.append(("tool_definition", {"tool": t}, f"tools/list[{i}] {t['name']}", tool_prose(t)))
        for i, pr in enumerate(lst.get("prompts") or []):
            if isinstance(pr, dict) and (txt := prompt_text(pr)).strip():
                items.append(("prompt", {"text": txt}, f"prompts/list[{i}] {pr.get('name')}", own_prose(pr)))
        res = (lst.get("resources") or [])[:MAX_RESOURCES]
        for i, r in enumerate(res):
            if isinstance(r, dict) and (txt := resource_text(r)).strip():
                items.append(("resource", {"text": txt}, f"resources/list[{i}] {r.get('uri')}", own_prose(r)))
        for i, r in enumerate(lst.get("resourceTemplates") or []):
            if isinstance(r, dict) and (txt := resource_text(r)).strip():
                items.append(("resource", {"text": txt}, f"resources/templates/list[{i}] {r.get('uriTemplate')}", own_prose(r)))
        counts = {c: 0 for c in CHANNEL_FILES}
        dup_here = 0
        echoed = 0
        for ch, body, where, prose in items:
            canon = json.dumps(body, sort_keys=True, ensure_ascii=False)
            if FAKE in canon or "127.0.0.1:9" in canon:
                echoed += 1  # the server wrote our placeholder into its listing: not its own text
                continue
            if (ch, canon) in seen:
                dups[ch] += 1
                dup_here += 1
                continue
            seen[(ch, canon)] = src
            # Register and language come from the server's own prose, not from the
            # lines this script adds (the `- argument: ...` list of a prompt).
            text = prose or body.get("text") or ""
            rec = {"id": None, **body, "label": "benign", "channel": ch, "category": "benign",
                   "register": register(text), "language": language(text)}
            if ch == "tool_definition":
                rec["poison_location"] = "none"
            rec.update({"provenance": "harvested", "parent_id": None, "lineage_group": k,
                        "source": f"{p['ecosystem']}:{p['package']}@{p['version']}", "origin": where})
            files[ch].append(rec)
            counts[ch] += 1
        entry["items"] = counts
        if invalid:
            entry["invalid_tools_skipped"] = invalid
        if echoed:
            entry["placeholder_echo_dropped"] = echoed
        entry["split"] = split_of(k)
        if dup_here:
            entry["duplicates_dropped"] = dup_here
        manifest_pkgs.append(entry)
    sums = {}
    for ch, recs in files.items():
        for i, r in enumerate(recs, 1):
            r["id"] = f"harvest_{ch}-{i:05d}"
        path = OUT / CHANNEL_FILES[ch]
        data = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in recs)
        path.write_text(data)
        splits = {sp: sum(1 for r in recs if split_of(r["lineage_group"]) == sp) for sp in ("train", "dev", "test")}
        sums[CHANNEL_FILES[ch]] = {"sha256": hashlib.sha256(data.encode()).hexdigest(),
                                   "records": len(recs), "duplicates_dropped": dups[ch], "splits": splits}
    listed = [e for e in manifest_pkgs if e["status"] == "listed"]
    manifest = {
        "about": "Benign MCP listings harvested from real packages by scripts/harvest/harvest_listings.py; "
        "see corpus/SCHEMA.md (Harvested) and scripts/harvest/README.md.",
        "protocol_version_requested": PROTOCOL,
        "packages_in_list": len(manifest_pkgs),
        "packages_attempted": sum(1 for e in manifest_pkgs if e["status"] != "not_attempted"),
        "packages_listed": len(listed),
        "packages_failed": sum(1 for e in manifest_pkgs if e["status"] == "failed"),
        "failure_kinds": dict(sorted(Counter(e["failure_kind"] for e in manifest_pkgs
                                             if e["status"] == "failed").items(), key=lambda kv: -kv[1])),
        "listed_by_ecosystem": dict(Counter(e["ecosystem"] for e in listed)),
        "attempted_by_ecosystem": dict(Counter(e["ecosystem"] for e in manifest_pkgs if e["status"] != "not_attempted")),
        "files": sums,
        "packages": manifest_pkgs,
    }
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest


# -------------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scratch", type=Path, default=Path("/work/harvest-scratch"))
    ap.add_argument("--phase", choices=["all", "install", "list", "write"], default="all")
    ap.add_argument("--only", nargs="*", help="ecosystem:package keys")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--reverse", action="store_true",
                    help="take the packages from the end of the list (a second run meeting the first)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per request")
    ap.add_argument("--jobs", type=int, default=3, help="servers listed at once")
    ap.add_argument("--relist", action="store_true", help="list again packages already listed")
    ap.add_argument("--status", default="install-status.json",
                    help="install status file in the scratch dir (a second run at the same time uses its own)")
    ap.add_argument("--prune", action="store_true",
                    help="delete each install once its servers are listed (keeps disk use low)")
    a = ap.parse_args()
    scratch = a.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    pkgs = load_packages(a)
    sf = scratch / a.status
    status = json.loads(sf.read_text()) if sf.exists() else {}
    if a.only:
        for k in a.only:
            if "install_error" in status.get(k, {}):
                del status[k]
    t0 = time.time()
    ld = scratch / "listings"
    ld.mkdir(exist_ok=True)
    lock = threading.Lock()

    def listed(p) -> bool:
        f = ld / f"{safe(key_of(p))}.json"
        return f.exists() and not a.relist and json.loads(f.read_text())["status"] == "listed"

    def one(p):
        res = list_package(p, scratch, status, a.timeout)
        (ld / f"{safe(key_of(p))}.json").write_text(json.dumps(res, indent=1, ensure_ascii=False))
        print(f"{key_of(p)}: {res['status']} {res.get('reason', '')[:160]}", file=sys.stderr, flush=True)

    ex = cf.ThreadPoolExecutor(a.jobs)

    def done(group, d):
        """An install finished: save the status, list its packages, prune if asked."""
        with lock:
            sf.write_text(json.dumps(status, indent=1))
        if a.phase != "all":
            return
        futs = [ex.submit(one, p) for p in group if not listed(p)]
        if d is not None and a.prune:
            def prune(_f, futs=futs, d=d):
                if all(f.done() for f in futs):
                    shutil.rmtree(d, ignore_errors=True)
            for f in futs:
                f.add_done_callback(prune)
            if not futs:
                shutil.rmtree(d, ignore_errors=True)

    todo = [p for p in pkgs if not listed(p)]
    if a.phase in ("all", "install"):
        uv = shutil.which("uv") or str(scratch / "uvbin" / "bin" / "uv")
        if a.prune:  # pruned installs are gone: install again what is still to list
            for p in todo:
                if "installed" in status.get(key_of(p), {}) and not Path(status[key_of(p)]["installed"]).exists():
                    del status[key_of(p)]
        for p in todo:  # already installed (e.g. by --phase install): list now
            if "installed" in status.get(key_of(p), {}) and a.phase == "all":
                done([p], None)
        try:
            py_install(todo, scratch, status, uv, done)
            npm_install(todo, scratch, status, done)
        finally:
            sf.write_text(json.dumps(status, indent=1))
        print(f"install phase {time.time()-t0:.0f}s", file=sys.stderr)
    if a.phase == "list":
        for p in todo:
            ex.submit(one, p)
    ex.shutdown(wait=True)
    print(f"list phase done {time.time()-t0:.0f}s", file=sys.stderr)
    if a.phase in ("all", "write"):
        all_pkgs = load_packages(argparse.Namespace(only=None, limit=None))
        m = write_corpus(all_pkgs, scratch)
        print(f"listed {m['packages_listed']}/{m['packages_attempted']} attempted; "
              + ", ".join(f"{k}: {v['records']}" for k, v in m["files"].items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
