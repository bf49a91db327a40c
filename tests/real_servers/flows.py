"""A measurement, not a test: ordinary workflows that move a value from one real server
to another, through one gateway (default preset), and which of their steps the gateway
refuses. `together.py` runs each server's own steps, so values never cross servers
there; a user's agent moves them all the time (a path found by one server, committed by
another; a page fetched by one, saved by another).

Each workflow runs on freshly built data under one `portcullis proxy --config` with the
servers it uses (filesystem rooted at the data directory, mcp-server-git on the
repository inside it, mcp-server-sqlite on a database inside it, mcp-server-fetch on the
local site, server-memory), driven by the Python SDK client; a step's arguments are
computed from the previous steps' answers, as an agent would. Prints one line per step:
forwarded, or refused with the gateway's reason.

    .interop/venv/bin/python tests/real_servers/flows.py [--portcullis target/debug/portcullis]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as R  # noqa: E402
import servers as S  # noqa: E402


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content if getattr(c, "text", None))


def first_line_with(text: str, word: str) -> str:
    return next((line.strip() for line in text.splitlines() if word in line), "")


# (name, servers used, steps): a step is (server, tool, args(data, web, answers) -> dict).
WORKFLOWS = [
    ("commit the file a search found", ["filesystem", "git"], [
        ("filesystem", "search_files", lambda d, w, a: {"path": f"{d}/repo", "pattern": "todo*"}),
        ("git", "git_add", lambda d, w, a: {"repo_path": f"{d}/repo", "files": [first_line_with(a[0], "todo")]}),
        ("git", "git_commit", lambda d, w, a: {"repo_path": f"{d}/repo", "message": "Add the gauge check"}),
    ]),
    ("read a file the repository status names", ["git", "filesystem"], [
        ("git", "git_status", lambda d, w, a: {"repo_path": f"{d}/repo"}),
        ("filesystem", "read_text_file", lambda d, w, a: {"path": f"{d}/repo/" + (
            "count.py" if "count.py" in a[0] else "README.md")}),
    ]),
    ("save a fetched page", ["fetch", "filesystem"], [
        ("fetch", "fetch", lambda d, w, a: {"url": f"{w}/index.html"}),
        ("filesystem", "write_file", lambda d, w, a: {"path": f"{d}/page.md", "content": a[0]}),
    ]),
    ("export a query's answer to a file", ["sqlite", "filesystem"], [
        ("sqlite", "read_query", lambda d, w, a: {
            "query": "SELECT species, SUM(count) AS total FROM counts GROUP BY species ORDER BY species"}),
        ("filesystem", "write_file", lambda d, w, a: {"path": f"{d}/totals.txt", "content": a[0]}),
    ]),
    ("remember what a page says", ["fetch", "memory"], [
        ("fetch", "fetch", lambda d, w, a: {"url": f"{w}/index.html"}),
        ("memory", "create_entities", lambda d, w, a: {"entities": [{
            "name": "Aln survey", "entityType": "survey",
            "observations": [first_line_with(a[0], "counted") or a[0][:200]]}]}),
    ]),
    ("note a commit in a file", ["git", "filesystem"], [
        ("git", "git_log", lambda d, w, a: {"repo_path": f"{d}/repo", "max_count": 1}),
        ("filesystem", "write_file", lambda d, w, a: {"path": f"{d}/last-commit.txt", "content": a[0]}),
    ]),
]


def setup(d: Path) -> None:
    S.write_docs(d)
    S.git_repo(d)
    S.sqlite_db(d)


async def run_flow(portcullis: Path, work: Path, web: str, name: str, used: list[str], steps) -> list[str]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    base = work / name.replace(" ", "-")
    shutil.rmtree(base, ignore_errors=True)
    data, home = base / "data", base / "home"
    data.mkdir(parents=True)
    home.mkdir()
    setup(data)
    p = R.paths()
    ctx = {k: str(v) for k, v in p.items()}
    ctx.update({"data": str(data), "web": web})
    by_name = {s.name: s for s in S.SERVERS}
    entries = []
    for n in used:
        s = by_name[n]
        command = R.subst(s.command, ctx)
        if n == "filesystem":
            command = command[:-1] + [str(data)]
        if n == "sqlite":
            command = [c.replace(str(data) + "/survey.db", str(data / "survey.db")) for c in command]
        entries.append({"name": n, "command": command, "env": R.server_env(s, ctx, home), "cwd": str(data)})
    import together as T
    audit, state = base / "audit.jsonl", base / "state.sqlite"
    cfg = base / "gateway.toml"
    cfg.write_text(T.gateway_config(entries, audit, state))
    env = {"PATH": R.server_env(by_name[used[0]], {}, home)["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "TZ": "UTC"}
    out, answers = [], []
    params = StdioServerParameters(command=str(portcullis), args=["proxy", "--config", str(cfg)], env=env, cwd=str(base))
    with open(base / "gateway.stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=60) as client:
            await client.list_tools()
            for server, tool, args in steps:
                a = args(str(data), web, answers)
                try:
                    r = await client.call_tool(f"{server}__{tool}", a)
                    t = text_of(r)
                    refused = t.startswith("portcullis:")
                    out.append(f"  {server}__{tool}: {'REFUSED ' + t[:300] if refused else 'forwarded'}")
                except Exception as ex:  # noqa: BLE001 - a refusal as a JSON-RPC error
                    t = str(getattr(ex, "message", ex))
                    out.append(f"  {server}__{tool}: REFUSED (error) {t[:300]}")
                answers.append(t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--portcullis", type=Path, default=R.ROOT / "target/debug/portcullis")
    ns = ap.parse_args()
    miss = R.missing_pieces()
    if miss:
        print(f"flows: not installed: {', '.join(miss)}\n{R.SETUP_HINT}", file=sys.stderr)
        return 3
    work = Path(tempfile.mkdtemp(prefix="portcullis-flows-"))
    web, url = R.start_web(work / "_web")
    refused = 0
    try:
        for name, used, steps in WORKFLOWS:
            lines = asyncio.run(run_flow(ns.portcullis.resolve(), work, url, name, used, steps))
            refused += any("REFUSED" in line for line in lines)
            print(f"{name} ({' + '.join(used)}):")
            print("\n".join(lines))
    finally:
        web.shutdown()
    print(f"flows: {refused} of {len(WORKFLOWS)} workflows had a step refused (work files in {work})")
    print(json.dumps({"refused": refused, "workflows": len(WORKFLOWS)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
