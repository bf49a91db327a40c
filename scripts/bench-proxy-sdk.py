#!/usr/bin/env python3
"""The gateway as a user of the Python MCP SDK sees it: direct vs `portcullis proxy`.

One interleaved run with the official Python `mcp` SDK client (the one in
.interop/venv, installed by scripts/setup-interop.sh): for each cell, rounds of
`--calls / --rounds` calls alternate between direct sessions with the upstream and
sessions through the gateway, so a change in the machine's load hits both sides alike.
Over stdio each side is one session (a process pair); "sequential" waits for each
result, "N in flight" keeps N calls outstanding on that session. Over Streamable HTTP
the upstream listens on a local port (the test server's HTTP mode, server-everything's
`streamableHttp`) and the gateway is `portcullis proxy --listen --no-stdio` whose
`[[server]] url` is that same upstream (with `keep_alive`, as the SDK keeps its
connections too); "N sessions" runs N client sessions at once, each calling in turn. The payloads are prose (a
deterministic text of sentences, not random characters, which the decoders treat
differently): the test server's `payload` tool returns KiB of it, server-everything's
`echo` gets it as its `message` (so the gateway reads it in the arguments and again in
the result). Prints one Markdown table: p50/p95 ms of each side, the ratio of the p50s,
calls per second of each side and their ratio.

    .interop/venv/bin/python scripts/bench-proxy-sdk.py            # after scripts/setup-interop.sh
    .interop/venv/bin/python scripts/bench-proxy-sdk.py --calls 400 --kib 1,64 --gateway-arg=--no-fsync
    .interop/venv/bin/python scripts/bench-proxy-sdk.py --transports http
    .interop/venv/bin/python scripts/bench-proxy-sdk.py --floor rmcp   # a floor in the gateway's place (stdio)
    .interop/venv/bin/python scripts/bench-proxy-sdk.py --kib 1 --tree .interop/node_modules/ajv  # + a directory_tree row
    .interop/venv/bin/python scripts/bench-proxy-sdk.py --kib "" --read .interop/node_modules/glob/README.md  # + a file read

Needs release binaries (`cargo build --release -p portcullis -p portcullis-testkit`).
Every gateway run writes its audit log in a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

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


async def run_side(targets: list[Any], tool: str, args: dict, calls: int, inflight: int,
                   warmup: int) -> tuple[list[float], float]:
    """Latencies (ms) of `calls` calls spread over one session per target (all at once),
    and calls per second from the first measured call to the last answer."""
    lat: list[float] = []
    per = max(1, calls // len(targets))
    # Connect and warm up every session first, then measure them together.
    ready = asyncio.Event()
    started: list[float] = []
    finished: list[float] = []

    async def one(target: Any) -> None:
        async with Client(target, read_timeout_seconds=60, cache=None) as client:
            for _ in range(warmup):
                r = await client.call_tool(tool, args)
                if r.is_error:
                    raise SystemExit(f"{tool} answered with an error: {r.content[:1]}")
            started.append(time.perf_counter())
            if len(started) == len(targets):
                ready.set()
            await ready.wait()
            queue = iter(range(per))

            async def worker() -> None:
                for _ in queue:
                    t = time.perf_counter()
                    r = await client.call_tool(tool, args)
                    lat.append((time.perf_counter() - t) * 1000)
                    if r.is_error:
                        raise SystemExit(f"{tool} answered with an error: {r.content[:1]}")

            await asyncio.gather(*(worker() for _ in range(inflight)))
            # The last answer, not the end of the session: closing a session waits
            # for the server process to exit, which some servers take their time
            # over (server-everything: ~0.3 s), and that is not a call's cost.
            finished.append(time.perf_counter())

    await asyncio.gather(*(one(t) for t in targets))
    return lat, len(lat) / (max(finished) - max(started))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with status {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not listen on {port} within 30 s")
        time.sleep(0.1)


def listening_url(proc: subprocess.Popen, marker: str, what: str) -> str:
    """The URL a child prints on stderr after `marker`. Its stderr is drained from then on
    (dropped), so that the child never blocks on a full pipe."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if marker in line:
            rest = proc.stderr
            threading.Thread(target=lambda: [None for _ in rest], daemon=True).start()
            return line.split(marker, 1)[1].strip()
    raise SystemExit(f"{what} exited (status {proc.wait()}) without printing {marker!r}")


@contextlib.contextmanager
def http_pair(upstream: list[str], ns: argparse.Namespace, work: Path, n: int) -> Iterator[tuple[str, str]]:
    """An HTTP upstream and a gateway in front of it: (direct URL, gateway URL)."""
    procs: list[subprocess.Popen] = []
    try:
        if upstream[0] == str(ns.testserver):
            up = subprocess.Popen([*upstream, "--transport", "http", "--listen", "127.0.0.1:0"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
            procs.append(up)
            url = listening_url(up, "listening on ", "the test server")
        else:
            port = free_port()
            up = subprocess.Popen([*upstream[:2], "streamableHttp"], env={**os.environ, "PORT": str(port)},
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(up)
            wait_port(port, up, "server-everything")
            url = f"http://127.0.0.1:{port}/mcp"
        cfg = work / f"gateway-{n}.toml"
        cfg.write_text(f'[audit]\nlog = "{work / f"audit-http-{n}.jsonl"}"\n'
                       f'[[server]]\nname = "up"\nurl = "{url}"\nkeep_alive = true\n')
        gw = subprocess.Popen([str(ns.portcullis), "proxy", "--listen", "127.0.0.1:0", "--no-stdio",
                               "--config", str(cfg), *ns.gateway_arg],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        procs.append(gw)
        gurl = listening_url(gw, "portcullis: listening on ", "the gateway")
        yield url, gurl
    finally:
        for p in reversed(procs):
            p.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
            if p.poll() is None:
                p.kill()


async def cell(transport: str, label: str, upstream: list[str], tool: str, args: dict,
               ns: argparse.Namespace, concurrent: int, work: Path) -> str:
    n = 0
    sides: dict[str, tuple[list[float], list[float]]] = {"direct": ([], []), "gateway": ([], [])}
    per_round = max(1, ns.calls // ns.rounds)
    with contextlib.ExitStack() as stack:
        if transport == "http":
            direct_url, gateway_url = stack.enter_context(http_pair(upstream, ns, work, len(list(work.iterdir()))))
        for r in range(ns.rounds):
            for side in ("direct", "gateway") if r % 2 == 0 else ("gateway", "direct"):
                if transport == "http":
                    # `concurrent` sessions at once, each calling in turn.
                    url = direct_url if side == "direct" else gateway_url
                    targets: list[Any] = [url] * concurrent
                    inflight = 1
                elif side == "direct":
                    targets, inflight = [StdioServerParameters(command=upstream[0], args=upstream[1:])], concurrent
                elif ns.floor:
                    # The floor takes the gateway's place: portcullis-proxy-bench's own
                    # relay, run by its hidden first argument.
                    relay = {"bytes": "__relay-stdio", "rmcp": "__relay-rmcp-stdio"}[ns.floor]
                    targets = [StdioServerParameters(command=str(ns.proxy_bench), args=[relay, *upstream])]
                    inflight = concurrent
                else:
                    n += 1
                    log = work / f"audit-{n}.jsonl"
                    targets = [StdioServerParameters(
                        command=str(ns.portcullis),
                        args=["proxy", "--audit-log", str(log), *ns.gateway_arg, "--", *upstream],
                    )]
                    inflight = concurrent
                lat, rate = await run_side(targets, tool, args, per_round, inflight, ns.warmup)
                sides[side][0].extend(lat)
                sides[side][1].append(rate)
    d, g = sides["direct"], sides["gateway"]
    dp50, gp50 = statistics.median(d[0]), statistics.median(g[0])
    drate, grate = statistics.mean(d[1]), statistics.mean(g[1])
    if concurrent == 1:
        mode = "sequential"
    elif transport == "http":
        mode = f"{concurrent} sessions"
    else:
        mode = f"{concurrent} in flight, 1 session"
    return (f"| {transport} | {label} | {mode} | {dp50:.3f} / {percentile(d[0], 0.95):.3f} | "
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
    p.add_argument("--tree", type=Path,
                   help="also a row of server-filesystem's `directory_tree` of this directory (a long "
                        "listing of many short names, which the lexical stage scores stretch by stretch)")
    p.add_argument("--read", type=Path, action="append", default=[],
                   help="also a row of server-filesystem's `read_text_file` of this file (real long text: "
                        "a README, a changelog; repeatable)")
    p.add_argument("--filesystem", type=Path,
                   default=ROOT / ".interop/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
                   help="server-filesystem's dist/index.js, for --tree and --read")
    p.add_argument("--calls", type=int, default=600, help="measured calls per cell and side")
    p.add_argument("--rounds", type=int, default=4, help="interleaving rounds (each a new session per side)")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured calls at the start of each session")
    p.add_argument("--kib", default="1,64", help="payload sizes in KiB")
    p.add_argument("--concurrency", type=int, default=16,
                   help="calls in flight (stdio) or sessions (HTTP) in the concurrent rows")
    p.add_argument("--transports", default="stdio", help="stdio, http or both (stdio,http)")
    p.add_argument("--gateway-arg", action="append", default=[],
                   help="one more argument for `portcullis proxy` (repeatable)")
    p.add_argument("--floor", choices=["bytes", "rmcp"],
                   help="put a floor in the gateway's place (stdio only): `bytes`, a bare byte relay; "
                        "`rmcp`, an rmcp pass-through without inspection or log (portcullis-proxy-bench's)")
    p.add_argument("--proxy-bench", type=Path, default=rel / "portcullis-proxy-bench",
                   help="portcullis-proxy-bench, whose relays are the floors")
    ns = p.parse_args()
    if ns.floor and ns.transports != "stdio":
        print("--floor is measured over stdio only here (give --transports stdio); "
              "portcullis-proxy-bench --floor measures both transports", file=sys.stderr)
        return 2
    if ns.floor and not os.access(ns.proxy_bench, os.X_OK):
        print(f"{ns.proxy_bench} is not an executable: build it with "
              "`cargo build --release -p portcullis-testkit`", file=sys.stderr)
        return 2
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
    if (ns.tree or ns.read) and not ns.filesystem.is_file():
        print(f"{ns.filesystem} not found (scripts/setup-interop.sh installs it): --tree and --read need it",
              file=sys.stderr)
        return 2
    if ns.tree:
        tree = ns.tree.resolve()
        if not tree.is_dir():
            print(f"--tree {ns.tree}: not a directory", file=sys.stderr)
            return 2
        cells.append((f"server-filesystem directory_tree {tree.name}", [ns.node, str(ns.filesystem), str(tree)],
                      "directory_tree", {"path": str(tree)}))
    for read in ns.read:
        file = read.resolve()
        if not file.is_file():
            print(f"--read {read}: not a file", file=sys.stderr)
            return 2
        # The file's own directory is the one the server may read.
        cells.append((f"server-filesystem read_text_file {file.parent.name}/{file.name} "
                       f"({file.stat().st_size // 1024} KiB)",
                       [ns.node, str(ns.filesystem), str(file.parent)], "read_text_file", {"path": str(file)}))
    import importlib.metadata as md
    what = (f"gateway column: the {ns.floor} floor (--floor {ns.floor}), no gateway" if ns.floor
            else f"gateway arguments: {' '.join(ns.gateway_arg) or '(defaults)'}")
    print(f"client: Python mcp SDK {md.version('mcp')}; calls per cell and side: {ns.calls} in "
          f"{ns.rounds} interleaved rounds; {what}; CPUs: {os.cpu_count()}")
    print()
    print("| transport | upstream tool | mode | direct p50 / p95 ms | gateway p50 / p95 ms | p50 × | "
          "direct calls/s | gateway calls/s | throughput × |")
    print("|---|---|---|---|---|---|---|---|---|")
    transports = [t.strip() for t in ns.transports.split(",") if t.strip()]
    for t in transports:
        if t not in ("stdio", "http"):
            print(f"--transports: unknown transport {t!r} (give stdio, http or stdio,http)", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="portcullis-sdk-bench-") as work:
        for transport in transports:
            for label, upstream, tool, args in cells:
                if transport == "http" and tool in ("directory_tree", "read_text_file"):
                    continue  # server-filesystem speaks stdio only
                for concurrent in (1, ns.concurrency):
                    row = asyncio.run(cell(transport, label, upstream, tool, args, ns, concurrent, Path(work)))
                    print(row, flush=True)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
    print(f"\nload average at the end: {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
