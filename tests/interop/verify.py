#!/usr/bin/env python3
"""Runs every client driver against every server DIRECTLY (no gateway) and checks what
each received. Stdlib only; run it with any python3 >= 3.10 after
scripts/setup-interop.sh and `cargo build -p portcullis-testkit`:

    python3 tests/interop/verify.py [--only SUBSTRING]

Servers: portcullis-testserver (stdio, HTTP), py_server.py (stdio, HTTP),
server-everything (stdio, streamableHttp), server-filesystem (stdio only).
Clients: py_client.py (mode auto and legacy), ts_client.mjs, and the MCP Inspector CLI.
Prints one line per case and a closing `N passed, N failed`; exits 1 if any failed.
Every server it starts listens on 127.0.0.1 and is stopped before the next case.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
INTEROP = Path(os.environ.get("PORTCULLIS_INTEROP_DIR", ROOT / ".interop"))
NODE = str(INTEROP / "node_modules/node/bin/node")
PY = str(INTEROP / "venv/bin/python")
TESTSERVER = os.environ.get("PORTCULLIS_TESTSERVER", str(ROOT / "target/debug/portcullis-testserver"))
EVERYTHING = str(INTEROP / "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
FILESYSTEM = str(INTEROP / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
PY_SERVER = str(ROOT / "tests/interop/py_server.py")
PY_CLIENT = [PY, str(ROOT / "tests/interop/py_client.py")]
TS_CLIENT = [NODE, str(ROOT / "tests/interop/ts_client.mjs")]
TIMEOUT = 90



def injections() -> dict[str, str]:
    """The injection texts, read from the Rust module so the check cannot drift from it."""
    src = (ROOT / "crates/portcullis-testkit/src/injections.rs").read_text()
    out: dict[str, str] = {}
    for name in ("INSTRUCTIONS", "SAMPLING", "ELICITATION", "RUGPULL", "RESOURCE", "PROMPT"):
        start = src.index(f"pub const {name}: &str = ")
        body = src[start:].split('";', 1)[0].split('"', 1)[1]
        # Rust line continuations: backslash-newline plus leading spaces vanish.
        lines = body.split("\\\n")
        text = lines[0] + "".join(line.lstrip() for line in lines[1:])
        out[name] = text.replace("\\n", "\n")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, seconds: float = 20) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port} after {seconds}s")


def run_driver(client: list[str], args: list[str]) -> tuple[int, dict[str, Any]]:
    p = subprocess.run(client + args, capture_output=True, text=True, timeout=TIMEOUT)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise RuntimeError(f"driver printed no JSON (rc={p.returncode}): {p.stdout[:300]!r} {p.stderr[-600:]!r}") from e


class Http:
    """Starts an HTTP server for one case and stops it after."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str] | None = None):
        self.argv, self.port, self.env = argv, port, env

    def __enter__(self) -> str:
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, **(self.env or {})},
        )
        wait_port(self.port, self.proc)
        return f"http://127.0.0.1:{self.port}/mcp"

    def __exit__(self, *exc: Any) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def call(out: dict, tool: str) -> dict:
    for c in out["calls"]:
        if c["tool"] == tool:
            return c
    raise AssertionError(f"no call of {tool}")


def text(result: dict | None) -> str:
    assert result is not None, "no result"
    return "\n".join(c.get("text", "") for c in result.get("content", []))


def names(out: dict) -> list[str]:
    return [t["name"] for t in out["tools"]]


def contains(obj: Any, needle: str) -> bool:
    """Whether a text occurs in any string of a JSON value (compared in escaped form)."""
    return json.dumps(needle, ensure_ascii=False)[1:-1] in json.dumps(obj, ensure_ascii=False)


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


INJ = injections()
ATTACK_ARGS = [
    "--call", "echo", "--args", '{"text":"hi"}',
    "--call", "daily_quote",
    "--call", "smart_summary",
    "--call", "account_setup",
    "--call", "slow", "--args", '{"ms":100}', "--progress",
    "--read", "note://onboarding",
    "--prompt", "code_review",
]


def check_attack(rc: int, out: dict) -> None:
    check(rc == 0, f"rc={rc} fatal={out.get('fatal')}")
    check(out["instructions"] == INJ["INSTRUCTIONS"], "instructions injection missing")
    check({"file_search", "weather_lookup", "daily_quote", "read_config"} <= set(names(out)), f"tools {names(out)}")
    check(text(call(out, "echo")["result"]) == "hi", "echo")
    check(contains(out["sampling_requests"], INJ["SAMPLING"]), "no sampling request seen")
    check(contains(out["elicitation_requests"], INJ["ELICITATION"]), "no elicitation request seen")
    check("fixed sampling reply" in text(call(out, "smart_summary")["result"]), "sampling answer not returned")
    check("decline" in text(call(out, "account_setup")["result"]), "elicitation answer not returned")
    check(any(n.get("method") == "notifications/tools/list_changed" for n in out["notifications"]), "no list_changed")
    check(any(n.get("method") == "notifications/progress" for n in out["notifications"]), "no progress")
    check(contains(out["reads"], INJ["RESOURCE"]), "resource injection missing")
    check(contains(out["prompt_results"], INJ["PROMPT"]), "prompt injection missing")
    check(out["templates"] and out["templates"][0]["uriTemplate"] == "note://{name}", "template")


def check_py_server(rc: int, out: dict) -> None:
    check(rc == 0, f"rc={rc} fatal={out.get('fatal')}")
    check(set(names(out)) == {"echo", "weather"}, f"tools {names(out)}")
    check(text(call(out, "weather")["result"]).startswith("Oslo: "), "weather")
    check(json.dumps(out["reads"]).count("portcullis-py-server") >= 1, "resource read")
    check("Rome" in json.dumps(out["prompt_results"]), "prompt")
    check(out["templates"][0]["uriTemplate"] == "city://{name}", "template")


PY_SERVER_ARGS = ["--call", "weather", "--args", '{"city":"Oslo"}', "--read", "info://server",
                  "--prompt", "trip_plan", "--prompt-args", '{"city":"Rome"}']


def check_everything(rc: int, out: dict) -> None:
    check(rc == 0, f"rc={rc} fatal={out.get('fatal')}")
    check(text(call(out, "echo")["result"]) == "Echo: hi", "echo")
    check("fixed sampling reply" in text(call(out, "trigger-sampling-request")["result"]), "sampling")
    check(len(out["sampling_requests"]) == 1, "sampling request not logged")


EVERYTHING_ARGS = ["--call", "echo", "--args", '{"message":"hi"}',
                   "--call", "trigger-sampling-request", "--args", '{"prompt":"hi","maxTokens":10}']


def cases(fs_dir: str) -> list[tuple[str, Callable[[], None]]]:
    out: list[tuple[str, Callable[[], None]]] = []
    clients = [("py-auto", PY_CLIENT), ("py-legacy", PY_CLIENT + ["--mode", "legacy"]), ("ts", TS_CLIENT)]
    for cname, client in clients:
        out.append((f"{cname} -> testserver attack stdio",
                    lambda c=client: check_attack(*run_driver(c, ATTACK_ARGS + ["--stdio", "--", TESTSERVER, "--profile", "attack"]))))

        def http_attack(c=client) -> None:
            port = free_port()
            with Http([TESTSERVER, "--transport", "http", "--listen", f"127.0.0.1:{port}", "--profile", "attack"], port) as url:
                check_attack(*run_driver(c, ATTACK_ARGS + ["--http", url]))
        out.append((f"{cname} -> testserver attack http", http_attack))

        out.append((f"{cname} -> py_server stdio",
                    lambda c=client: check_py_server(*run_driver(c, PY_SERVER_ARGS + ["--stdio", "--", PY, PY_SERVER]))))

        def http_py(c=client) -> None:
            port = free_port()
            with Http([PY, PY_SERVER, "--http", str(port)], port) as url:
                check_py_server(*run_driver(c, PY_SERVER_ARGS + ["--http", url]))
        out.append((f"{cname} -> py_server http", http_py))

        out.append((f"{cname} -> server-everything stdio",
                    lambda c=client: check_everything(*run_driver(c, EVERYTHING_ARGS + ["--stdio", "--", NODE, EVERYTHING]))))

        def http_everything(c=client) -> None:
            port = free_port()
            with Http([NODE, EVERYTHING, "streamableHttp"], port, env={"PORT": str(port)}) as url:
                check_everything(*run_driver(c, EVERYTHING_ARGS + ["--http", url]))
        out.append((f"{cname} -> server-everything http", http_everything))

        def filesystem(c=client) -> None:
            rc, o = run_driver(c, ["--call", "read_text_file", "--args", json.dumps({"path": f"{fs_dir}/a.txt"}),
                                   "--stdio", "--", NODE, FILESYSTEM, fs_dir])
            check(rc == 0, f"rc={rc} fatal={o.get('fatal')}")
            check(text(call(o, "read_text_file")["result"]) == "hello from the filesystem\n", "read_text_file")
        out.append((f"{cname} -> server-filesystem stdio", filesystem))

    def crash(c=PY_CLIENT) -> None:
        for client in (PY_CLIENT, TS_CLIENT):
            rc, o = run_driver(client, ["--call", "crash", "--stdio", "--", TESTSERVER, "--faults"])
            check(rc == 1 and o["connection_lost"], f"crash: rc={rc} lost={o['connection_lost']}")
    out.append(("py+ts -> testserver crash exits 1 with connection_lost", crash))

    def inspector() -> None:
        env = {**os.environ, "PATH": f"{Path(NODE).parent}:{os.environ.get('PATH', '')}"}
        p = subprocess.run(
            ["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli", "--method", "tools/list",
             "--", TESTSERVER, "--profile", "attack", "--poison", "schema"],
            cwd=INTEROP, env=env, capture_output=True, text=True, timeout=TIMEOUT,
        )
        check(p.returncode == 0, f"inspector rc={p.returncode}: {p.stderr[-400:]}")
        listed = [t["name"] for t in json.loads(p.stdout)["tools"]]
        check("file_search" in listed and "weather_lookup" not in listed, f"inspector tools {listed}")
    out.append(("inspector cli -> testserver stdio tools/list", inspector))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    ns = ap.parse_args()
    for path in (NODE, PY, TESTSERVER):
        if not Path(path).exists():
            print(f"missing {path}: run scripts/setup-interop.sh and cargo build -p portcullis-testkit", file=sys.stderr)
            return 2
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="kit-fs-") as fs_dir:
        Path(fs_dir, "a.txt").write_text("hello from the filesystem\n")
        for name, fn in cases(os.path.realpath(fs_dir)):
            if ns.only not in name:
                continue
            t0 = time.time()
            try:
                fn()
                passed += 1
                print(f"ok    {name} ({time.time() - t0:.1f}s)", flush=True)
            except Exception as e:  # noqa: BLE001 - one line per failed case
                failed += 1
                print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
