#!/usr/bin/env python3
"""The real-server regression suite: every server of servers.py, direct and behind
`portcullis proxy`, with the Python SDK client (this process, `mcp` from .interop/venv)
and the TypeScript SDK client (ts_session.mjs), over real stdio.

For each server and client: the session runs once direct and once through the gateway
(fresh data directory at the same path, fresh audit log and state store). Then:

- every record of the gateway's audit log is an item inspected; a record whose status is
  not ALLOW or whose action is hold/deny is an item held;
- a tool, resource, template or prompt listed direct but missing through the gateway is
  withheld; a string starting "portcullis: " in a gateway answer is a notice;
- the two transcripts, normalized (servers.py: clock readings, random ids), must be
  identical: listings, initialize result, every step's result or error, key order too.

    .interop/venv/bin/python tests/real_servers/run.py --portcullis target/debug/portcullis
        [--only NAME,NAME] [--jobs N] [--table FILE.md] [--json FILE] [--work DIR]

Exit 0: zero held, withheld, notices and differences beyond the known ones; 1: anything
else (the report says what); 3: the pieces are not installed (the message names the
set-up command).

Known failures (`known.json`, each with the issue that owns it) are the ratchet of work
not done yet: a held or withheld item not listed there, or more notices or differences
on a server than listed, fails the run; a listed item that no longer happens is
reported as fixed (remove it from the file). `--no-known` checks against zero.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import functools
import http.server
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# Extra arguments of `portcullis proxy` (`--detector FILE`), set once from the command line.
GATEWAY_ARGS: list[str] = []
sys.path.insert(0, str(HERE))

import servers as S  # noqa: E402

SETUP_HINT = "run scripts/setup-interop.sh (make test runs it through scripts/setup.sh)"
SAMPLING_REPLY = "The grey heron."
SESSION_TIMEOUT = 120.0  # one whole session, seconds
REQUEST_TIMEOUT = 45.0  # one request


def interop_dir() -> Path:
    return Path(os.environ.get("PORTCULLIS_INTEROP_DIR") or ROOT / ".interop")


def paths() -> dict[str, Path]:
    i = interop_dir()
    rs = i / "real-servers"
    return {
        "node": i / "node_modules/node/bin/node",
        "interop_npm": i / "node_modules",
        "npm": rs / "node_modules",
        "mcp2": rs / "py-mcp2/bin",
        "mcp1": rs / "py-mcp1/bin",
    }


def missing_pieces() -> list[str]:
    p = paths()
    miss = [str(v) for k, v in p.items() if not v.exists()]
    try:
        import mcp  # noqa: F401
    except ImportError:
        miss.append("the `mcp` Python SDK (run this script with .interop/venv/bin/python)")
    return miss


# --- versions ----------------------------------------------------------------------


def version_of(server: S.Server) -> str:
    p = paths()
    if server.ecosystem == "npm":
        base = p["interop_npm"] if server.command[1].startswith("{interop_npm}") else p["npm"]
        try:
            return json.loads((base / server.package / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            return "?"
    venv = p["mcp1" if server.command[0].startswith("{mcp1}") else "mcp2"].parent
    want = re.sub(r"[-_.]+", "_", server.package).lower()
    for d in venv.glob("lib/python*/site-packages/*.dist-info"):
        name, _, ver = d.name[: -len(".dist-info")].rpartition("-")
        if re.sub(r"[-_.]+", "_", name).lower() == want:
            return ver
    return "?"


# --- the local web site ------------------------------------------------------------


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a: Any) -> None:
        pass


def start_web(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "index.html").write_text(S.HTML_PAGE)
    (root / "method.html").write_text(S.METHOD_PAGE)
    (root / "robots.txt").write_text(S.ROBOTS)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


# --- substitution ------------------------------------------------------------------


def subst(value: Any, ctx: dict[str, str]) -> Any:
    if isinstance(value, str):
        for k, v in ctx.items():
            value = value.replace("{" + k + "}", v)
        return value
    if isinstance(value, list):
        return [subst(v, ctx) for v in value]
    if isinstance(value, tuple):
        return [subst(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: subst(v, ctx) for k, v in value.items()}
    return value


# --- the Python client -------------------------------------------------------------


def dump(model: Any) -> Any:
    if model is None:
        return None
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return model


async def py_session(command: list[str], env: dict[str, str], cwd: str, steps: list, errlog) -> dict:
    import mcp_types as types
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    out: dict[str, Any] = {
        "client": "python-mcp", "init": None, "tools": [], "resources": [], "templates": [], "prompts": [],
        "list_errors": {}, "steps": [], "sampling_requests": [], "elicitation_requests": [], "fatal": None,
    }

    async def on_sampling(context, params):
        out["sampling_requests"].append(dump(params))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=SAMPLING_REPLY),
            model="fixed-reply", stop_reason="endTurn",
        )

    async def on_elicitation(context, params):
        out["elicitation_requests"].append(dump(params))
        return types.ElicitResult(action="decline")

    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=cwd)
    # Seconds from the start to `initialize` answered, and each listing's (all
    # its pages): not compared, printed by together.py.
    out["seconds"] = {}
    t0 = time.monotonic()
    async with Client(
        stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=REQUEST_TIMEOUT,
        sampling_callback=on_sampling, elicitation_callback=on_elicitation, cache=None,
    ) as client:
        out["seconds"]["initialize"] = round(time.monotonic() - t0, 2)
        caps = client.server_capabilities
        out["init"] = {
            "protocol_version": client.protocol_version, "server_info": dump(client.server_info),
            "capabilities": dump(caps), "instructions": client.instructions,
        }

        async def list_all(name: str, fn, key: str) -> None:
            items: list = []
            cursor = None
            started = time.monotonic()
            try:
                for _ in range(50):
                    r = await fn(cursor=cursor)
                    items.extend(dump(x) for x in getattr(r, key))
                    cursor = r.next_cursor
                    if not cursor:
                        break
                out[name] = items
                out["seconds"][name] = round(time.monotonic() - started, 2)
            except Exception as e:  # a listing the server does not implement is recorded
                out["list_errors"][name] = f"{type(e).__name__}: {e}"

        if caps.tools is not None:
            await list_all("tools", client.list_tools, "tools")
        if caps.resources is not None:
            await list_all("resources", client.list_resources, "resources")
            await list_all("templates", client.list_resource_templates, "resource_templates")
        if caps.prompts is not None:
            await list_all("prompts", client.list_prompts, "prompts")
        for step in steps:
            kind, name = step[0], step[1]
            args = step[2] if len(step) > 2 else None
            entry: dict[str, Any] = {"kind": kind, "name": name, "args": args, "result": None, "error": None}
            try:
                if kind == "call":
                    entry["result"] = dump(await client.call_tool(name, args))
                elif kind == "read":
                    entry["result"] = dump(await client.read_resource(name))
                else:
                    entry["result"] = dump(await client.get_prompt(name, {k: str(v) for k, v in (args or {}).items()}))
            except Exception as e:
                code = getattr(e, "code", None)
                entry["error"] = {"code": code if isinstance(code, int) else None, "message": str(getattr(e, "message", e))}
            out["steps"].append(entry)
    return out


def run_py(command, env, cwd, steps, log: Path) -> dict:
    with open(log, "w") as errlog:
        try:
            return asyncio.run(asyncio.wait_for(py_session(command, env, cwd, steps, errlog), SESSION_TIMEOUT))
        except BaseException as e:  # noqa: BLE001 - every failure is a transcript with `fatal`
            if isinstance(e, KeyboardInterrupt):
                raise
            return {"client": "python-mcp", "fatal": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-3000:]}


def run_ts(command, env, cwd, steps, log: Path) -> dict:
    p = paths()
    spec = log.with_suffix(".spec.json")
    spec.write_text(json.dumps({"command": command, "env": env, "cwd": cwd, "steps": steps, "timeout": REQUEST_TIMEOUT}))
    try:
        r = subprocess.run(
            [str(p["node"]), str(HERE / "ts_session.mjs"), str(spec)],
            capture_output=True, text=True, timeout=SESSION_TIMEOUT, env={**os.environ, "PORTCULLIS_INTEROP_DIR": str(interop_dir())},
        )
    except subprocess.TimeoutExpired:
        return {"client": "typescript-sdk", "fatal": f"session did not finish within {SESSION_TIMEOUT} s (killed)"}
    log.write_text(r.stderr)
    for line in reversed(r.stdout.splitlines()):
        try:
            j = json.loads(line)
            if isinstance(j, dict):
                return j
        except ValueError:
            continue
    return {"client": "typescript-sdk", "fatal": f"no transcript (exit {r.returncode}): {r.stderr[-1500:]}"}


# --- one server --------------------------------------------------------------------


def server_env(server: S.Server, ctx: dict[str, str], home: Path) -> dict[str, str]:
    p = paths()
    env = {
        "PATH": f"{p['node'].parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "PYTHONDONTWRITEBYTECODE": "1",
        # Python servers that print a set (cli-mcp-server's allowed commands) print it in
        # the same order in every run.
        "PYTHONHASHSEED": "0",
        "RUST_LOG": "warn",
    }
    env.update(subst(server.env, ctx))
    return env


def reset(server: S.Server, base: Path) -> tuple[Path, Path]:
    data, home = base / "data", base / "home"
    for d in (data, home):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    if server.setup:
        server.setup(data)
    return data, home


def read_audit(log: Path) -> list[dict]:
    recs = []
    if log.is_file():
        for line in log.read_text().splitlines():
            try:
                recs.append(json.loads(line))
            except ValueError:
                recs.append({"status": "UNPARSEABLE", "action": "?", "reasons": [line[:200]]})
    return recs


def is_held(rec: dict) -> bool:
    return rec.get("status") != "ALLOW" or rec.get("action") in ("hold", "deny")


def rule_ids(rec: dict) -> list[str]:
    ids = []
    for st in rec.get("stages") or []:
        for f in st.get("findings") or []:
            rid = f.get("rule") or f.get("id") or f.get("kind")
            if rid:
                ids.append(f"{st.get('stage') or st.get('name')}:{rid}")
        if st.get("probability") is not None or st.get("score") is not None:
            sc = st.get("probability", st.get("score"))
            if isinstance(sc, (int, float)) and sc >= 0.5:
                ids.append(f"{st.get('stage') or st.get('name')}={sc:.3f}")
    return sorted(set(ids))


def normalizer(server: S.Server, ctx: dict[str, str]):
    pats = [(re.compile(a), b) for a, b in server.normalize]

    def norm(v: Any) -> Any:
        if isinstance(v, str):
            for rx, rep in pats:
                v = rx.sub(rep, v)
            return v
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: blob(x) if k == "blob" and server.decode_blobs else norm(x) for k, x in v.items()}
        return v

    def blob(v: Any) -> Any:
        try:
            return "base64 of: " + norm(base64.b64decode(v, validate=True).decode("utf-8"))
        except (ValueError, TypeError):
            return norm(v)

    return norm


def first_diff(a: Any, b: Any, path: str = "", masked: list | None = None) -> str:
    """The first difference between a (direct) and b (gateway), or "". A string the
    gateway masked (`[REDACTED:…]`) is not a difference: it is appended to `masked`."""
    if isinstance(b, str) and "[REDACTED:" in b and a != b and masked is not None:
        masked.append(f"{path or '/'}: {short(a, 80)} -> {short(b, 80)}")
        return ""
    if type(a) is not type(b):
        return f"{path or '/'}: {short(a)} != {short(b)}"
    if isinstance(a, dict):
        if list(a) != list(b):
            if set(a) != set(b):
                return f"{path or '/'}: keys {sorted(set(a) ^ set(b))} only on one side"
            for k in a:
                d = first_diff(a[k], b[k], f"{path}/{k}", masked)
                if d:
                    return d
            return f"{path or '/'}: key order {list(a)[:8]} != {list(b)[:8]}"
        for k in a:
            d = first_diff(a[k], b[k], f"{path}/{k}", masked)
            if d:
                return d
        return ""
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path or '/'}: {len(a)} items != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, f"{path}/{i}", masked)
            if d:
                return d
        return ""
    return "" if a == b else f"{path or '/'}: {short(a)} != {short(b)}"


def short(v: Any, n: int = 160) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[: n - 3] + "..."


def notices(v: Any, where: str = "") -> list[str]:
    found = []
    if isinstance(v, str):
        if v.startswith("portcullis: ") or "by the gateway (record " in v:
            found.append(f"{where}: {v[:300]}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            found += notices(x, f"{where}/{i}")
    elif isinstance(v, dict):
        for k, x in v.items():
            found += notices(x, f"{where}/{k}")
    return found


def entry_names(t: dict, kind: str) -> list[str]:
    key = {"tools": "name", "prompts": "name", "resources": "uri", "templates": "uriTemplate"}[kind]
    return [x.get(key) for x in t.get(kind) or []]


def compare(direct: dict, gated: dict, masked: list) -> list[str]:
    """Differences between two normalized transcripts, one line per section (and the
    values the gateway masked, into `masked`)."""
    diffs = []
    if direct.get("fatal"):
        diffs.append(f"direct session failed: {direct['fatal']}")
    if gated.get("fatal"):
        diffs.append(f"gateway session failed: {gated['fatal']}")
    if diffs:
        return diffs
    for sec in ("init", "tools", "resources", "templates", "prompts", "list_errors", "sampling_requests", "elicitation_requests"):
        m: list = []
        d = first_diff(direct.get(sec), gated.get(sec), "", m)
        masked += [f"{sec}{x}" for x in m]
        if d:
            diffs.append(f"{sec}{d if d.startswith('/') else ' ' + d}")
    ds, gs = direct.get("steps") or [], gated.get("steps") or []
    if len(ds) != len(gs):
        diffs.append(f"steps: {len(ds)} direct != {len(gs)} through the gateway")
    for i, (a, b) in enumerate(zip(ds, gs)):
        m = []
        d = first_diff({"result": a.get("result"), "error": a.get("error")}, {"result": b.get("result"), "error": b.get("error")}, "", m)
        masked += [f"step {i} {a.get('kind')} {a.get('name')}: {x}" for x in m]
        if d:
            diffs.append(f"step {i} {a.get('kind')} {a.get('name')}: {d}")
    return diffs


def run_server(server: S.Server, portcullis: Path, work: Path, web: str, clients: list[str]) -> dict:
    p = paths()
    base = work / server.name
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    ctx = {k: str(v) for k, v in p.items()}
    ctx.update({"data": str(base / "data"), "web": web})
    command = subst(server.command, ctx)
    steps = subst(server.steps, ctx)
    norm = normalizer(server, ctx)
    res: dict[str, Any] = {
        "server": server.name, "package": server.package, "ecosystem": server.ecosystem,
        "version": version_of(server), "clients": {},
    }
    t0 = time.monotonic()
    for client in clients:
        runner = run_py if client == "python" else run_ts
        transcripts = {}
        audit = base / f"{client}-gateway" / "audit.jsonl"
        for mode in ("direct", "gateway"):
            data, home = reset(server, base)
            env = server_env(server, ctx, home)
            cmd = command if mode == "direct" else [str(portcullis), "proxy", *GATEWAY_ARGS, "--audit-log", str(audit), "--", *command]
            audit.parent.mkdir(parents=True, exist_ok=True)
            t = runner(cmd, env, str(data) if server.cwd_data else str(base), steps, base / f"{client}-{mode}.stderr.log")
            (base / f"{client}-{mode}.json").write_text(json.dumps(t, indent=1, ensure_ascii=False))
            transcripts[mode] = t
        recs = read_audit(audit)
        held = [r for r in recs if is_held(r)]
        d, g = transcripts["direct"], transcripts["gateway"]
        withheld: list[str] = []
        masked: list[str] = []
        for kind in ("tools", "resources", "templates", "prompts"):
            gset = set(entry_names(g, kind))
            withheld += [f"{kind[:-1]} {n}" for n in entry_names(d, kind) if n not in gset]
        res["clients"][client] = {
            "items": len(recs),
            "held": [
                {
                    "channel": r.get("channel"), "tool": r.get("tool"), "path": r.get("path"),
                    "status": r.get("status"), "action": r.get("action"), "score": r.get("score"),
                    "rules": rule_ids(r), "reasons": r.get("reasons"), "id": r.get("id"),
                }
                for r in held
            ],
            "withheld": withheld,
            "notices": notices(g.get("steps")) + notices(g.get("init")),
            "diffs": compare(norm(d), norm(g), masked),
            "masked": masked,
            "listed": {k: len(d.get(k) or []) for k in ("tools", "resources", "templates", "prompts")},
            "steps": len(steps),
            "step_errors": [f"{s.get('kind')} {s.get('name')}: {short(s.get('error'))}" for s in d.get("steps") or [] if s.get("error")],
        }
    res["seconds"] = round(time.monotonic() - t0, 1)
    return res


# --- report ------------------------------------------------------------------------


def table(results: list[dict]) -> str:
    lines = [
        "| server | package | version | items inspected | items held | withheld | notices | differences from direct | masked |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    tot = [0, 0, 0, 0, 0, 0]
    for r in results:
        cs = r["clients"].values()
        items = sum(c["items"] for c in cs)
        held = sum(len(c["held"]) for c in cs)
        wh = sum(len(c["withheld"]) for c in cs)
        no = sum(len(c["notices"]) for c in cs)
        di = sum(len(c["diffs"]) for c in cs)
        ma = sum(len(c.get("masked") or []) for c in cs)
        for i, v in enumerate((items, held, wh, no, di, ma)):
            tot[i] += v
        lines.append(f"| {r['server']} | {r['ecosystem']}: `{r['package']}` | {r['version']} | {items} | {held} | {wh} | {no} | {di} | {ma} |")
    lines.append(f"| **all {len(results)}** | | | **{tot[0]}** | **{tot[1]}** | **{tot[2]}** | **{tot[3]}** | **{tot[4]}** | **{tot[5]}** |")
    return "\n".join(lines) + "\n"


def details(results: list[dict]) -> str:
    out = []
    for r in results:
        for client, c in r["clients"].items():
            head = f"{r['server']} ({client})"
            for h in c["held"]:
                where = h["tool"] or ""
                out.append(
                    f"HELD     {head}: {h['channel']} {where} {h['path'] or ''} -> {h['status']}/{h['action']} "
                    f"score={h['score']} rules={h['rules']} reasons={h['reasons']}"
                )
            for w in c["withheld"]:
                out.append(f"WITHHELD {head}: {w}")
            for n in c["notices"]:
                out.append(f"NOTICE   {head}: {n}")
            for d in c["diffs"]:
                out.append(f"DIFF     {head}: {d}")
            for m in c.get("masked") or []:
                out.append(f"MASKED   {head}: {m}")
    return "\n".join(out) + ("\n" if out else "")


def held_key(server: str, client: str, h: dict) -> str:
    """A held item's identity, stable across runs: no scores, ids or reasons."""
    rules = ",".join(r.split("=")[0] for r in h["rules"])
    return f"{server} {client} {h['channel']} {h['tool'] or '-'} {h['status']}/{h['action']} [{rules}]"


def against_known(results: list[dict], known: dict) -> tuple[list[str], list[str]]:
    """(new failures, known failures that did not happen). Held and withheld items
    are matched by key; notices and differences by their count per server and client."""
    want = {e["key"] for e in known.get("held", []) + known.get("withheld", [])}
    counts = {e["key"]: e for e in known.get("counts", [])}
    new, fixed, seen = [], [], set()
    for r in results:
        for client, c in r["clients"].items():
            for k in [held_key(r["server"], client, h) for h in c["held"]] + [
                f"{r['server']} {client} {w}" for w in c["withheld"]
            ]:
                seen.add(k)
                if k not in want:
                    new.append(f"new hold or withheld item: {k}")
            k = f"{r['server']} {client}"
            for what in ("notices", "diffs"):
                n, m = len(c[what]), int(counts.get(k, {}).get(what, 0))
                if n > m:
                    new.append(f"{k}: {n} {what} (known: {m})")
                elif n < m:
                    fixed.append(f"{k}: {n} {what}, known.json says {m} (lower it)")
    fixed = sorted(want - seen) + fixed
    return new, fixed


def as_known(results: list[dict]) -> dict:
    """This run's failures in the form of known.json; `why` starts as the record's
    reasons and is meant to be replaced by the cause and the issue that owns it."""
    held, withheld, counts = [], [], []
    for r in results:
        for client, c in r["clients"].items():
            for h in c["held"]:
                held.append({"key": held_key(r["server"], client, h), "why": "; ".join((h["reasons"] or [])[:2])})
            for w in c["withheld"]:
                withheld.append({"key": f"{r['server']} {client} {w}", "why": ""})
            if c["notices"] or c["diffs"]:
                counts.append({"key": f"{r['server']} {client}", "notices": len(c["notices"]),
                               "diffs": len(c["diffs"]), "why": "; ".join((c["diffs"] + c["notices"])[:2])[:300]})
    return {"held": held, "withheld": withheld, "counts": counts}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--portcullis", type=Path, default=ROOT / "target/debug/portcullis")
    ap.add_argument("--only", default="")
    ap.add_argument("--clients", default="python,typescript")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("PORTCULLIS_REAL_SERVERS_JOBS", "3")))
    ap.add_argument("--config", type=Path,
                    help="run the gateway with this detector configuration (proxy --detector) instead of the default preset")
    ap.add_argument("--table", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--list", action="store_true", help="print the servers and exit")
    ap.add_argument("--known", type=Path, default=HERE / "known.json",
                    help="known failures (default tests/real_servers/known.json)")
    ap.add_argument("--no-known", action="store_true", help="check against zero, not the known failures")
    ap.add_argument("--write-known", type=Path,
                    help="write this run's failures as a known-failures file (then say why, per entry)")
    ns = ap.parse_args()
    if ns.config:
        GATEWAY_ARGS.extend(["--detector", str(ns.config.resolve())])
    chosen = [s for s in S.SERVERS if not ns.only or s.name in ns.only.split(",")]
    if ns.list:
        for s in chosen:
            print(f"{s.name}\t{s.ecosystem}\t{s.package}\t{version_of(s)}\t{s.note}")
        return 0
    miss = missing_pieces()
    if miss:
        print(f"real servers: not installed: {', '.join(miss)}\n{SETUP_HINT}", file=sys.stderr)
        return 3
    if not ns.portcullis.is_file():
        print(f"real servers: {ns.portcullis} not found (cargo build -p portcullis)", file=sys.stderr)
        return 3
    work = ns.work or Path(tempfile.mkdtemp(prefix="portcullis-real-servers-"))
    work.mkdir(parents=True, exist_ok=True)
    # The SDK logs what servers put on stdout besides JSON-RPC (some print banners there):
    # into a file of the work directory, not over the report.
    logging.basicConfig(filename=str(work / "python-client.log"), level=logging.WARNING, force=True)
    web, url = start_web(work / "_web")
    t0 = time.monotonic()
    results: list[dict] = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, ns.jobs)) as pool:
            futs = {pool.submit(run_server, s, ns.portcullis.resolve(), work, url, ns.clients.split(",")): s for s in chosen}
            for f in concurrent.futures.as_completed(futs):
                s = futs[f]
                try:
                    r = f.result()
                except Exception:  # noqa: BLE001 - a harness failure is reported per server
                    r = {"server": s.name, "package": s.package, "ecosystem": s.ecosystem, "version": version_of(s),
                         "clients": {"harness": {"items": 0, "held": [], "withheld": [], "notices": [],
                                                 "diffs": [f"harness error: {traceback.format_exc()[-1500:]}"]}}}
                results.append(r)
                print(f"real servers: {r['server']} done ({r.get('seconds', '?')} s)", file=sys.stderr, flush=True)
    finally:
        web.shutdown()
    order = {s.name: i for i, s in enumerate(chosen)}
    results.sort(key=lambda r: order[r["server"]])
    elapsed = time.monotonic() - t0
    tab = table(results)
    det = details(results)
    print(tab)
    print(det)
    print(f"real servers: {len(results)} servers in {elapsed:.0f} s; work files in {work}")
    if ns.table:
        ns.table.parent.mkdir(parents=True, exist_ok=True)
        ns.table.write_text(
            f"# Real MCP servers behind the gateway ({'configuration ' + str(ns.config) if ns.config else 'default preset'})\n\n"
            "Written by `tests/real_servers/run.py --table` (see tests/real_servers/README.md). "
            "Items inspected: the gateway's audit records over the Python and TypeScript sessions; "
            "held: records not ALLOW or with action hold/deny.\n\n" + tab + ("\n```\n" + det + "```\n" if det else "")
        )
    if ns.json:
        ns.json.parent.mkdir(parents=True, exist_ok=True)
        ns.json.write_text(json.dumps({"seconds": round(elapsed, 1), "results": results}, indent=1, ensure_ascii=False))
    if ns.write_known:
        ns.write_known.write_text(json.dumps(as_known(results), indent=1, ensure_ascii=False) + "\n")
    known = {} if ns.no_known or not ns.known.is_file() else json.loads(ns.known.read_text())
    if ns.only:
        # A subset: known entries of other servers are not expected to happen.
        names = set(ns.only.split(","))
        for k in ("held", "withheld", "counts"):
            known[k] = [e for e in known.get(k, []) if e["key"].split(" ")[0] in names]
    new, fixed = against_known(results, known)
    for f in fixed:
        print(f"real servers: known failure no longer happens: {f}")
    for n in new:
        print(f"real servers: FAIL {n}")
    listed = len(known.get("held", [])) + len(known.get("withheld", []))
    print(f"real servers: {len(new)} new failure(s); {listed} known item(s) in {ns.known.name}")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
