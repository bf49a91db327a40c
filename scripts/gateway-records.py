#!/usr/bin/env python3
"""Where the gateway's inspection time goes on one real call, from its own records.

Calls one tool of @modelcontextprotocol/server-filesystem (from .interop, installed by
scripts/setup-interop.sh) `--calls` times through `portcullis proxy --audit-log`, with
the official Python `mcp` SDK client, then prints the median, over the calls after the
first `--skip`, of each detection stage's latency in the tool results' decision records
(µs), and the records' status.

    .interop/venv/bin/python scripts/gateway-records.py --read .interop/node_modules/glob/README.md
    .interop/venv/bin/python scripts/gateway-records.py --tree .interop/node_modules/ajv --portcullis BIN

The gateway runs with a fresh PORTCULLIS_HOME and audit log in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


async def calls(ns: argparse.Namespace, home: Path, log: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    if ns.read:
        target = ns.read.resolve()
        root, tool, args = target.parent, "read_text_file", {"path": str(target)}
    else:
        target = ns.tree.resolve()
        root, tool, args = target, "directory_tree", {"path": str(target)}
    params = StdioServerParameters(
        command=str(ns.portcullis),
        args=["proxy", "--audit-log", str(log), "--", ns.node, str(ns.filesystem), str(root)],
        env={**os.environ, "PORTCULLIS_HOME": str(home)},
    )
    # The server's own log lines (its stderr) are not the figures.
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                for _ in range(ns.calls):
                    await s.call_tool(tool, args)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--read", type=Path, help="a file: server-filesystem's read_text_file of it")
    what.add_argument("--tree", type=Path, help="a directory: server-filesystem's directory_tree of it")
    p.add_argument("--portcullis", type=Path, default=ROOT / "target" / "release" / "portcullis")
    p.add_argument("--filesystem", type=Path,
                   default=ROOT / ".interop/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
    p.add_argument("--node", default="node")
    p.add_argument("--calls", type=int, default=12)
    p.add_argument("--skip", type=int, default=2, help="first calls left out (warm-up)")
    ns = p.parse_args()
    for path, what_for in ((ns.portcullis, "build it with `cargo build --release -p portcullis`"),
                           (ns.filesystem, "scripts/setup-interop.sh installs it")):
        if not path.exists():
            print(f"{path} not found: {what_for}", file=sys.stderr)
            return 2
    if ns.read and not ns.read.is_file():
        print(f"--read {ns.read}: not a file", file=sys.stderr)
        return 2
    if ns.tree and not ns.tree.is_dir():
        print(f"--tree {ns.tree}: not a directory", file=sys.stderr)
        return 2
    if ns.calls <= ns.skip:
        print(f"--calls {ns.calls} must be more than --skip {ns.skip}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="portcullis-records-") as work:
        home, log = Path(work), Path(work) / "audit.jsonl"
        asyncio.run(calls(ns, home, log))
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    results = [r for r in records if r.get("channel") == "tool_result" and r.get("stages")][ns.skip:]
    if not results:
        print("no tool-result record with detection stages in the audit log", file=sys.stderr)
        return 1
    stages: dict[str, list[int]] = {}
    for r in results:
        for s in r["stages"]:
            stages.setdefault(s["name"], []).append(s.get("latency_us") or 0)
    print(f"{len(results)} tool-result records; status: "
          + ", ".join(f"{k} {v}" for k, v in sorted(
              {s: sum(1 for r in results if r["status"] == s) for s in {r["status"] for r in results}}.items())))
    print(f"inspection (record latency_us) median: {statistics.median(r['latency_us'] for r in results):.0f} µs")
    for name, lat in stages.items():
        print(f"  {name}: median {statistics.median(lat):.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
