#!/usr/bin/env python3
"""The gateway as a user of the Python MCP SDK sees it: direct vs `portcullis proxy`.

One interleaved run over stdio with the official Python `mcp` SDK client (the one in
.interop/venv, installed by scripts/setup-interop.sh): for each cell, rounds of
`--calls / --rounds` calls alternate between a direct session with the upstream and a
session through the gateway, so a change in the machine's load hits both sides alike.
Each side is one session (a process pair); "sequential" waits for each result, "N in
flight" keeps N calls outstanding on the same session. The payloads are prose (a
deterministic text of sentences, not random characters, which the decoders treat
differently): the test server's `payload` tool returns KiB of it, server-everything's
`echo` gets it as its `message` (so the gateway reads it in the arguments and again in
the result). Prints one Markdown table: p50/p95 ms of each side, the ratio of the p50s,
calls per second of each side and their ratio.

    .interop/venv/bin/python scripts/bench-proxy-sdk.py            # after scripts/setup-interop.sh
    .interop/venv/bin/python scripts/bench-proxy-sdk.py --calls 400 --kib 1,64 --gateway-arg=--no-fsync

Needs release binaries (`cargo build --release -p portcullis -p portcullis-testkit`).
Every gateway run writes its audit log in a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent

# Sentences of the kind a fetched page or a README carries. Written for this script;
# they contain no instruction to a model.
SENTENCES = [
    "The river rose two metres overnight and the ferry kept to its winter timetable.",
    "Install the package with your system's manager, then restart the service once.",
    "Quarterly revenue grew by four percent while shipping costs fell slightly.",
    "The library reads the configuration file from the current directory by default.",
    "Our volunteers repainted the station's waiting room in a single weekend in May.",
    "Each chapter ends with exercises; the answers are printed at the back of the book.",
    "The bridge closes to traffic on Sundays for the farmers' market on its east side.",
    "Memory use stayed flat during the long test, and no request timed out.",
]


def prose(n_bytes: int) -> str:
    """A deterministic prose text of exactly `n_bytes` ASCII bytes."""
    out: list[str] = []
    size = 0
    i = 0
    while size < n_bytes:
        s = SENTENCES[i % len(SENTENCES)] + (" " if i % 5 != 4 else "\n")
        out.append(s)
        size += len(s)
        i += 1
    return "".join(out)[:n_bytes]


def percentile(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


async def run_side(params: StdioServerParameters, tool: str, args: dict, calls: int, inflight: int,
                   warmup: int) -> tuple[list[float], float]:
    """Latencies (ms) of `calls` calls on one new session, and calls per second."""
    async with Client(params, read_timeout_seconds=60, cache=None) as client:
        for _ in range(warmup):
            r = await client.call_tool(tool, args)
            if r.is_error:
                raise SystemExit(f"{tool} answered with an error: {r.content[:1]}")
        lat: list[float] = []
        queue = iter(range(calls))

        async def worker() -> None:
            for _ in queue:
                t = time.perf_counter()
                r = await client.call_tool(tool, args)
                lat.append((time.perf_counter() - t) * 1000)
                if r.is_error:
                    raise SystemExit(f"{tool} answered with an error: {r.content[:1]}")

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(inflight)))
        return lat, calls / (time.perf_counter() - t0)


async def cell(label: str, upstream: list[str], tool: str, args: dict, ns: argparse.Namespace,
               inflight: int, work: Path) -> str:
    direct = StdioServerParameters(command=upstream[0], args=upstream[1:])
    n = 0
    sides: dict[str, tuple[list[float], list[float]]] = {"direct": ([], []), "gateway": ([], [])}
    per_round = max(1, ns.calls // ns.rounds)
    for r in range(ns.rounds):
        for side in ("direct", "gateway") if r % 2 == 0 else ("gateway", "direct"):
            if side == "direct":
                params = direct
            else:
                n += 1
                log = work / f"audit-{n}.jsonl"
                params = StdioServerParameters(
                    command=str(ns.portcullis),
                    args=["proxy", "--audit-log", str(log), *ns.gateway_arg, "--", *upstream],
                )
            lat, rate = await run_side(params, tool, args, per_round, inflight, ns.warmup)
            sides[side][0].extend(lat)
            sides[side][1].append(rate)
    d, g = sides["direct"], sides["gateway"]
    dp50, gp50 = statistics.median(d[0]), statistics.median(g[0])
    drate, grate = statistics.mean(d[1]), statistics.mean(g[1])
    mode = "sequential" if inflight == 1 else f"{inflight} in flight, 1 session"
    return (f"| stdio | {label} | {mode} | {dp50:.3f} / {percentile(d[0], 0.95):.3f} | "
            f"{gp50:.3f} / {percentile(g[0], 0.95):.3f} | {gp50 / dp50:.2f} | {drate:.0f} | {grate:.0f} | "
            f"{grate / drate:.2f} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rel = ROOT / "target" / "release"
    p.add_argument("--portcullis", type=Path, default=rel / "portcullis")
    p.add_argument("--testserver", type=Path, default=rel / "portcullis-testserver")
    p.add_argument("--everything", type=Path,
                   default=ROOT / ".interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
                   help="server-everything's dist/index.js (its rows are skipped if absent)")
    p.add_argument("--node", default="node")
    p.add_argument("--calls", type=int, default=600, help="measured calls per cell and side")
    p.add_argument("--rounds", type=int, default=4, help="interleaving rounds (each a new session per side)")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured calls at the start of each session")
    p.add_argument("--kib", default="1,64", help="payload sizes in KiB")
    p.add_argument("--concurrency", type=int, default=16, help="calls in flight in the concurrent rows")
    p.add_argument("--gateway-arg", action="append", default=[],
                   help="one more argument for `portcullis proxy` (repeatable)")
    ns = p.parse_args()
    for b in (ns.portcullis, ns.testserver):
        if not os.access(b, os.X_OK):
            print(f"{b} is not an executable: build it with "
                  "`cargo build --release -p portcullis -p portcullis-testkit`", file=sys.stderr)
            return 2
    sizes = [int(k) for k in ns.kib.split(",") if k.strip()]
    cells: list[tuple[str, list[str], str, dict]] = []
    for k in sizes:
        cells.append((f"testserver payload {k} KiB", [str(ns.testserver)], "payload", {"kib": k}))
    if ns.everything.is_file():
        for k in sizes:
            cells.append((f"server-everything echo {k} KiB", [ns.node, str(ns.everything), "stdio"], "echo",
                          {"message": prose(k * 1024)}))
    else:
        print(f"{ns.everything} not found: the server-everything rows are skipped "
              "(scripts/setup-interop.sh installs it)", file=sys.stderr)
    import importlib.metadata as md
    print(f"client: Python mcp SDK {md.version('mcp')}; calls per cell and side: {ns.calls} in "
          f"{ns.rounds} interleaved rounds; gateway arguments: {' '.join(ns.gateway_arg) or '(defaults)'}; "
          f"CPUs: {os.cpu_count()}")
    print()
    print("| transport | upstream tool | mode | direct p50 / p95 ms | gateway p50 / p95 ms | p50 × | "
          "direct calls/s | gateway calls/s | throughput × |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="portcullis-sdk-bench-") as work:
        for label, upstream, tool, args in cells:
            for inflight in (1, ns.concurrency):
                row = asyncio.run(cell(label, upstream, tool, args, ns, inflight, Path(work)))
                print(row, flush=True)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
    print(f"\nload average at the end: {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
