#!/usr/bin/env python3
"""Pick the MCP server packages to harvest from the registry name lists and pin them.

Reads the npm and PyPI package lists of the workplace (name, version, downloads or
rank, summary; see the README), keeps names that look like MCP *servers* (not SDKs,
clients, proxies, frameworks or platform binaries), drops the 31 packages of the
real-server regression suite (tests/real_servers/servers.py: the outside measure, never
training data), and writes scripts/harvest/packages.json with the version each list
pins. The choice is by rule, not by hand, so it can be rerun and checked:

- npm: the `--npm N` most downloaded such packages;
- PyPI: every such package with a download rank in the list, then a deterministic
  sample (sha256 of the name) of recently released `mcp-server-*` / `*-mcp-server` /
  `*-mcp` names up to `--pypi N` in all.

Per-package start options (arguments, placeholder environment) live in
scripts/harvest/overrides.json and are merged in by harvest_listings.py.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LISTS = Path("/work/.library/env/packages")

# Name fragments of libraries around MCP rather than servers that offer tools.
NOT_A_SERVER = re.compile(
    r"(sdk|client|inspector|adapter|transport|framework|proxy|types|polyfill|plugin|"
    r"instrumentation|-linux-|-darwin-|-win32-|-windows-|utils|middleware|handler|"
    r"tunnel|session|config|test|auth|core|shared|lite\b|hub|router|gateway|eval|"
    r"[-/]ui\b|webmcp|@mcp-b/|react-|hono|express|nest|elysia|fastify|create-|builder|"
    r"generator|analytics|^agnost$|^use-mcp$|mcpb|mcporter|^tmcp|^xmcp$|fastmcp|"
    r"^mcp-use|^mcp$|^mcp-server$|mcpc|langchain|llama-index|openinference|"
    r"opentelemetry|mastra/mcp$|@ai-sdk|cli$|-cli\b|/cli\b|starter|template|demo|"
    r"hello|example|boilerplate|toolkit|kit$|schema|bundle|mcpo$|mcpadapt|provider|"
    r"connect|relay|bridge|wrapper|runner$|lambda|spec$)",
    re.I,
)


def suite_packages() -> set[str]:
    src = (ROOT / "tests/real_servers/servers.py").read_text()
    pairs = re.findall(r'Server\(\s*"[^"]+",\s*"([^"]+)",\s*"(npm|pypi)"', src)
    return {f"{eco}:{norm(eco, name)}" for name, eco in pairs}


def norm(eco: str, name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower() if eco == "pypi" else name


def read_tsv(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        r = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(r)
        return [row for row in r if len(row) >= 3]


def looks_like_server(name: str, summary: str) -> bool:
    if "mcp" not in name.lower():
        return False
    if NOT_A_SERVER.search(name):
        return False
    s = summary.lower()
    if any(w in s for w in ("sdk", "framework", "library for building", "client for", "proxy")):
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npm", type=int, default=190)
    ap.add_argument("--pypi", type=int, default=130)
    ap.add_argument("--out", type=Path, default=ROOT / "scripts/harvest/packages.json")
    a = ap.parse_args()
    exclude = suite_packages()
    assert len(exclude) == 31, f"expected the 31 suite packages, found {len(exclude)}"

    npm = []
    for row in read_tsv(LISTS / "npm.tsv"):
        name, version, downloads, summary = (row + [""] * 4)[:4]
        if not downloads.isdigit() or not looks_like_server(name, summary):
            continue
        if f"npm:{name}" in exclude or "-" in version and "mcp" not in version:
            continue  # suite packages; prereleases
        npm.append((int(downloads), name, version))
    npm.sort(key=lambda t: (-t[0], t[1]))
    picked = [
        {"ecosystem": "npm", "package": n, "version": v, "selected_by": f"npm downloads/month {d}"}
        for d, n, v in npm[: a.npm]
    ]

    ranked, pool = [], []
    for row in read_tsv(LISTS / "pypi.tsv"):
        name, version, month, rank, summary = (row + [""] * 5)[:5]
        if not looks_like_server(name, summary) or f"pypi:{norm('pypi', name)}" in exclude:
            continue
        if re.search(r"(a|b|rc|dev)\d*$", version):
            continue
        if rank.isdigit():
            ranked.append((int(rank), name, version))
        elif month >= "2026-06" and re.search(r"(^mcp-server-|-mcp-server$|-mcp$)", name):
            h = hashlib.sha256(name.encode()).hexdigest()
            pool.append((h, name, version))
    ranked.sort()
    pool.sort()
    py = [
        {"ecosystem": "pypi", "package": n, "version": v, "selected_by": f"pypi download rank {r}"}
        for r, n, v in ranked
    ]
    for h, n, v in pool[: max(0, a.pypi - len(py))]:
        py.append({"ecosystem": "pypi", "package": n, "version": v,
                   "selected_by": f"pypi sample sha256(name)={h[:8]}, released 2026-06 or later"})
    out = {
        "about": "MCP server packages harvested for corpus/harvest; written by "
        "scripts/harvest/select_packages.py from the workplace's registry lists. "
        "Excluded: the 31 packages of tests/real_servers/servers.py.",
        "excluded_suite_packages": sorted(exclude),
        "packages": picked + py,
    }
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(picked)} npm + {len(py)} pypi packages -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
