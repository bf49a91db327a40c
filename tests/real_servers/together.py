"""The real servers of the regression suite side by side behind ONE gateway.

run.py puts each server behind a gateway of its own, so nothing there compares one
server's tools with another's or follows a value from one server to another. A user's
client configuration lists several servers at once; this script starts every chosen
server of servers.py under one `portcullis proxy --config` (default preset, fresh
audit log and state store) and drives one Python SDK session through it: every
listing, then every server's scripted steps in turn, under the gateway's names
(`<server>__<tool>`). Each server is also run direct, alone, on the same freshly
built data, and the answers are compared as in run.py.

It reports, and fails (exit 1) on:

- **held items**: records not ALLOW or with action hold/deny (by channel, server,
  tool and rule ids: cross-server rules such as `names.*` and `taint.cross_server`
  show up here and nowhere in run.py);
- **withheld entries**: a tool, prompt, resource or template a server lists direct
  that the client does not see through the gateway;
- **differences**: a step whose answer through the gateway differs from the direct
  one after the server's own normalizations (servers.py), and notices.

    .interop/venv/bin/python tests/real_servers/together.py            # every server
    .interop/venv/bin/python tests/real_servers/together.py --only git,fetch,filesystem
    .interop/venv/bin/python tests/real_servers/together.py --twice filesystem,git   # two instances
    .interop/venv/bin/python tests/real_servers/together.py --all-twice --listing-only

Exit 3 when the pieces are not installed (scripts/setup-interop.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as R  # noqa: E402
import servers as S  # noqa: E402

# One session runs every server's steps: more time than run.py's per-server session.
TOGETHER_TIMEOUT = 900.0


def toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def gateway_config(entries: list[dict], audit: Path, state: Path) -> str:
    out = [
        "stdio = true",
        "[audit]",
        f"log = {toml_str(str(audit))}",
        "[state]",
        f"path = {toml_str(str(state))}",
    ]
    for e in entries:
        out += [
            "[[server]]",
            f"name = {toml_str(e['name'])}",
            f"command = {toml_str(e['command'][0])}",
            "args = [" + ", ".join(toml_str(a) for a in e["command"][1:]) + "]",
            f"cwd = {toml_str(e['cwd'])}",
            "[server.env]",
        ]
        out += [f"{toml_str(k)} = {toml_str(v)}" for k, v in sorted(e["env"].items())]
    return "\n".join(out) + "\n"


def gateway_step(name: str, step: tuple) -> tuple:
    """A step under the gateway's names: tools and prompts are `<server>__<name>`,
    resources keep their URIs."""
    kind = step[0]
    if kind in ("call", "prompt"):
        return (kind, f"{name}__{step[1]}", *step[2:])
    return step


def run_together(chosen: list[S.Server], portcullis: Path, work: Path, web: str, listing_only: bool = False) -> dict:
    p = R.paths()
    entries, directs = [], {}
    for server in chosen:
        base = work / server.name
        base.mkdir(parents=True, exist_ok=True)
        ctx = {k: str(v) for k, v in p.items()}
        ctx.update({"data": str(base / "data"), "web": web})
        command = R.subst(server.command, ctx)
        steps = [] if listing_only else R.subst(server.steps, ctx)
        data, home = R.reset(server, base)
        env = R.server_env(server, ctx, home)
        cwd = str(data) if server.cwd_data else str(base)
        directs[server.name] = R.run_py(command, env, cwd, steps, base / "direct.stderr.log")
        (base / "direct.json").write_text(json.dumps(directs[server.name], indent=1, ensure_ascii=False))
        entries.append({"name": server.name, "command": command, "env": env, "cwd": cwd,
                        "steps": steps, "norm": R.normalizer(server, ctx), "base": base, "server": server})
    # Every server's data rebuilt from scratch, as the direct runs found it.
    for e in entries:
        R.reset(e["server"], e["base"])
    gw = work / "gateway"
    gw.mkdir(parents=True, exist_ok=True)
    audit, state = gw / "audit.jsonl", gw / "state.sqlite"
    cfg = gw / "gateway.toml"
    cfg.write_text(gateway_config(entries, audit, state))
    steps = [gateway_step(e["name"], s) for e in entries for s in e["steps"]]
    env = {"PATH": R.server_env(chosen[0], {}, gw)["PATH"], "HOME": str(gw), "LANG": "C.UTF-8", "TZ": "UTC"}
    # One gateway starts every server before it answers `initialize`: with 62
    # servers on a 2-core machine busy with the other real-server tests that took
    # over run.py's 45 s per request (CI rehearsal of 2026-12-06; 111 s for the
    # whole test alone). The whole session keeps TOGETHER_TIMEOUT.
    R.REQUEST_TIMEOUT = max(R.REQUEST_TIMEOUT, 300.0)
    with open(gw / "gateway.stderr.log", "w") as errlog:
        try:
            g = asyncio.run(asyncio.wait_for(
                R.py_session([str(portcullis), "proxy", *R.GATEWAY_ARGS, "--config", str(cfg)],
                             env, str(gw), steps, errlog),
                TOGETHER_TIMEOUT))
        except BaseException as ex:  # noqa: BLE001 - reported, not raised
            if isinstance(ex, KeyboardInterrupt):
                raise
            g = {"fatal": f"{type(ex).__name__}: {ex}", "trace": traceback.format_exc()[-3000:]}
    (gw / "transcript.json").write_text(json.dumps(g, indent=1, ensure_ascii=False))
    out: dict[str, Any] = {"servers": [e["name"] for e in entries], "fatal": g.get("fatal"),
                           "held": [], "withheld": [], "diffs": [], "notices": [], "items": 0,
                           "seconds_through_gateway": g.get("seconds", {})}
    if g.get("fatal"):
        return out
    recs = R.read_audit(audit)
    out["items"] = len(recs)
    for r in recs:
        if R.is_held(r):
            out["held"].append(f"{r.get('channel')} {r.get('server')}/{r.get('tool') or '-'} "
                               f"{r.get('status')}/{r.get('action')} [{','.join(R.rule_ids(r))}] "
                               f"{'; '.join((r.get('reasons') or [])[:2])[:300]}")
    at = 0
    for e in entries:
        d = directs[e["name"]]
        if d.get("fatal"):
            out["diffs"].append(f"{e['name']}: the direct run failed: {d['fatal']}")
            at += len(e["steps"])
            continue
        for kind in ("tools", "prompts"):
            seen = set(R.entry_names(g, kind))
            out["withheld"] += [f"{e['name']}: {kind[:-1]} {n}" for n in R.entry_names(d, kind)
                                if f"{e['name']}__{n}" not in seen]
        for kind in ("resources", "templates"):
            seen = set(R.entry_names(g, kind))
            out["withheld"] += [f"{e['name']}: {kind[:-1]} {n}" for n in R.entry_names(d, kind) if n not in seen]
        mine = g["steps"][at:at + len(e["steps"])]
        at += len(e["steps"])
        for ds, gs in zip(d["steps"], mine):
            masked: list = []
            a = e["norm"]({"result": ds.get("result"), "error": ds.get("error")})
            b = e["norm"]({"result": gs.get("result"), "error": gs.get("error")})
            diff = R.first_diff(a, b, "", masked)
            if diff:
                out["diffs"].append(f"{e['name']}: {ds['kind']} {ds['name']}: {diff}")
            out["notices"] += [f"{e['name']}: {n}" for n in R.notices(gs.get("result"))]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--portcullis", type=Path, default=R.ROOT / "target/debug/portcullis")
    ap.add_argument("--only", default="", help="servers, comma-separated (default: every server of servers.py)")
    ap.add_argument("--twice", default="", help="servers configured a second time (as NAME-2, with data of "
                    "its own), as a user with two roots or two accounts does")
    ap.add_argument("--all-twice", action="store_true", help="every chosen server a second time (see --twice)")
    ap.add_argument("--listing-only", action="store_true",
                    help="compare the listings only (no steps): what the name rules decide")
    ap.add_argument("--config", type=Path, help="the gateway's detector configuration (proxy --detector)")
    ap.add_argument("--work", type=Path, help="keep the transcripts, logs and audit log here")
    ap.add_argument("--json", type=Path, help="write the report as JSON")
    ns = ap.parse_args()
    if ns.config:
        R.GATEWAY_ARGS.extend(["--detector", str(ns.config.resolve())])
    chosen = [s for s in S.SERVERS if not ns.only or s.name in ns.only.split(",")]
    twice = [s.name for s in chosen] if ns.all_twice else [t for t in ns.twice.split(",") if t]
    unknown = [t for t in twice if t not in {s.name for s in chosen}]
    if unknown:
        print(f"together: --twice {','.join(unknown)}: not among the chosen servers", file=sys.stderr)
        return 2
    chosen += [dataclasses.replace(s, name=f"{s.name}-2") for s in chosen if s.name in twice]
    miss = R.missing_pieces()
    if miss:
        print(f"together: not installed: {', '.join(miss)}\n{R.SETUP_HINT}", file=sys.stderr)
        return 3
    if not ns.portcullis.is_file():
        print(f"together: {ns.portcullis} not found (cargo build -p portcullis)", file=sys.stderr)
        return 3
    work = ns.work or Path(tempfile.mkdtemp(prefix="portcullis-together-"))
    work.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=str(work / "python-client.log"), level=logging.WARNING, force=True)
    web, url = R.start_web(work / "_web")
    t0 = time.monotonic()
    try:
        res = run_together(chosen, ns.portcullis.resolve(), work, url, ns.listing_only)
    finally:
        web.shutdown()
    res["seconds"] = round(time.monotonic() - t0, 1)
    if ns.json:
        ns.json.write_text(json.dumps(res, indent=1, ensure_ascii=False))
    print(f"together: {len(res['servers'])} servers behind one gateway, {res['items']} items inspected, "
          f"{len(res['held'])} held, {len(res['withheld'])} withheld, {len(res['diffs'])} differences, "
          f"{len(res['notices'])} notices ({res['seconds']} s; work files in {work})")
    if res.get("seconds_through_gateway"):
        print("together: through the gateway, seconds: " + ", ".join(
            f"{k} {v}" for k, v in res["seconds_through_gateway"].items()))
    if res["fatal"]:
        print(f"together: FAIL the session through the gateway failed: {res['fatal']}")
        return 1
    for what in ("held", "withheld", "diffs", "notices"):
        for line in res[what]:
            print(f"together: {what}: {line}")
    return 1 if any(res[w] for w in ("held", "withheld", "diffs", "notices")) else 0


if __name__ == "__main__":
    sys.exit(main())
