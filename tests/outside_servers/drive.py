#!/usr/bin/env python3
"""Run one new server direct and behind portcullis with the Python MCP SDK client.

    drive.py NAME [--list]      (--list: direct only, print tools/prompts/resources with schemas)

Re-uses the session / comparison helpers of tests/real_servers/run.py. Work files in
$OUTSIDE_WORK/work/NAME (default /tmp/portcullis-outside); the servers are installed there
by setup.sh, the gateway is $PORTCULLIS (default target/release/portcullis).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "real_servers"))
import run as RS  # noqa: E402

sys.path.insert(0, str(HERE))
import new_servers as NS  # noqa: E402

BASE = Path(os.environ.get("OUTSIDE_WORK", "/tmp/portcullis-outside"))
PORTCULLIS = Path(os.environ.get("PORTCULLIS", REPO / "target" / "release" / "portcullis"))
NODE_BIN = str(REPO / ".interop" / "node_modules" / "node" / "bin")


def env_for(srv, home: Path, data: Path) -> dict:
    env = {
        "PATH": f"{NODE_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "TZ": "UTC",
        "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
    }
    env.update({k: v.replace("{data}", str(data)) for k, v in srv.get("env", {}).items()})
    return env


def subst(v, data: Path):
    return RS.subst(v, {"data": str(data)})


def intervention(rec: dict) -> bool:
    return rec.get("status") != "ALLOW" or rec.get("action") in ("hold", "deny", "sanitize")


def main() -> int:
    name = sys.argv[1]
    list_only = "--list" in sys.argv
    srv = NS.SERVERS[name]
    base = BASE / "work" / name
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    logging.basicConfig(filename=str(base / "client.log"), level=logging.WARNING, force=True)
    data, home = base / "data", base / "home"
    cmd = subst(srv["cmd"], data)
    steps = [] if list_only else subst(srv.get("steps", []), data)
    transcripts = {}
    audit = base / "gateway" / "audit.jsonl"
    for mode in (("direct",) if list_only else ("direct", "gateway")):
        for d in (data, home):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        if srv.get("setup"):
            srv["setup"](data)
        c = cmd if mode == "direct" else [str(PORTCULLIS), "proxy", "--audit-log", str(audit),
                                             "--", *cmd]
        audit.parent.mkdir(parents=True, exist_ok=True)
        t = RS.run_py(c, env_for(srv, home, data), str(data), steps, base / f"{mode}.stderr.log")
        (base / f"{mode}.json").write_text(json.dumps(t, indent=1, ensure_ascii=False))
        transcripts[mode] = t
    d = transcripts["direct"]
    if list_only:
        if d.get("fatal"):
            print("FATAL", d["fatal"], d.get("trace", "")[-1500:])
        print("init:", json.dumps(d.get("init", {}).get("server_info")), "caps:", json.dumps(d.get("init", {}).get("capabilities")))
        for t in d.get("tools") or []:
            print("TOOL", t["name"], json.dumps(t.get("inputSchema", {}).get("properties", {}))[:400],
                  "req=", t.get("inputSchema", {}).get("required"))
        for k in ("prompts", "resources", "templates"):
            for x in d.get(k) or []:
                print(k.upper(), json.dumps(x)[:300])
        print("list_errors", d.get("list_errors"))
        return 0
    g = transcripts["gateway"]
    pats = [(re.compile(a), b) for a, b in srv.get("normalize", [])]

    def norm(v):
        if isinstance(v, str):
            for rx, rep in pats:
                v = rx.sub(rep, v)
            return v
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    recs = RS.read_audit(audit)
    held = [r for r in recs if intervention(r)]
    withheld = []
    for kind in ("tools", "resources", "templates", "prompts"):
        gset = set(RS.entry_names(g, kind))
        withheld += [f"{kind[:-1]} {n}" for n in RS.entry_names(d, kind) if n not in gset]
    masked: list = []
    diffs = RS.compare(norm(d), norm(g), masked)
    res = {
        "server": name, "package": srv["package"], "version": srv["version"], "items": len(recs),
        "listed": {k: len(d.get(k) or []) for k in ("tools", "resources", "templates", "prompts")},
        "steps": len(steps),
        "step_errors_direct": [f"{s['kind']} {s['name']}: {RS.short(s.get('error'))}" for s in d.get("steps") or [] if s.get("error")],
        "step_errors_gateway": [f"{s['kind']} {s['name']}: {RS.short(s.get('error'))}" for s in g.get("steps") or [] if s.get("error")],
        "interventions": held, "withheld": withheld, "notices": RS.notices(g.get("steps")) + RS.notices(g.get("init")),
        "diffs": diffs, "masked": masked,
    }
    (base / "result.json").write_text(json.dumps(res, indent=1, ensure_ascii=False))
    print(json.dumps({k: v for k, v in res.items() if k != "interventions"}, indent=1, ensure_ascii=False)[:6000])
    for h in held:
        print("INTERVENTION", json.dumps(h, ensure_ascii=False)[:4000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
