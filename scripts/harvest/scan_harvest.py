#!/usr/bin/env python3
"""Score the harvested benign records with the current detector, read-only.

    python3 scripts/harvest/scan_harvest.py --bin target/debug/portcullis [--preset balanced]

Runs `portcullis scan --input <batch> --format jsonl` over every record of
corpus/harvest/ (tool definitions as whole `tool` objects, the rest as text in their
channel), then reports per channel the share held for REVIEW or BLOCK with a Wilson 95%
interval, and the highest-scoring items with the field the lexical stage names.
Nothing is trained or calibrated. Writes corpus/harvest/scan_<preset>.json (summary)
and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "corpus" / "harvest"
FILES = ["tool_definition.jsonl", "server_instructions.jsonl", "prompt.jsonl", "resource.jsonl"]


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "target/debug/portcullis"))
    ap.add_argument("--preset", default="balanced")
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    recs = {}
    batch = []
    for f in FILES:
        for line in (DIR / f).read_text().splitlines():
            r = json.loads(line)
            recs[r["id"]] = r
            item = {"id": r["id"], "channel": r["channel"], "server": r["lineage_group"]}
            if r["channel"] == "tool_definition":
                item["tool"] = r["tool"]
                item["tool_name"] = r["tool"]["name"]
            else:
                item["text"] = r["text"]
            batch.append(item)
    with tempfile.TemporaryDirectory() as td:
        inp, out = Path(td) / "in.jsonl", Path(td) / "out.jsonl"
        inp.write_text("".join(json.dumps(b, ensure_ascii=False) + "\n" for b in batch))
        cmd = [a.bin, "scan", "--input", str(inp), "--format", "jsonl", "--preset", a.preset,
               "--exit-zero", "-o", str(out)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            return 1
        results = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    by_channel = defaultdict(Counter)
    scored = []
    for res in results:
        r = recs.get(res.get("id"))
        if r is None:
            continue
        by_channel[r["channel"]][res["status"]] += 1
        lex = next((s for s in res.get("stages", []) if s["name"] == "lexical"), {})
        rules = [f.get("rule") or f.get("id") for s in res.get("stages", []) if s["name"] == "rules"
                 for f in s.get("findings", [])]
        scored.append({
            "id": r["id"], "source": r["source"], "channel": r["channel"],
            "tool": r["tool"]["name"] if r["channel"] == "tool_definition" else None,
            "origin": r["origin"], "score": res["score"], "status": res["status"],
            "path": (lex.get("evidence") or {}).get("path"),
            "excerpt": ((lex.get("evidence") or {}).get("deciding_chunk") or {}).get("excerpt"),
            "rules": [x for x in rules if x],
        })
    summary = {"preset": a.preset, "binary": a.bin, "config_hash": results[0].get("config_hash") if results else None,
               "channels": {}}
    rows = ["| channel | items | REVIEW | BLOCK | flagged share | Wilson 95% |", "|---|---:|---:|---:|---:|---|"]
    tot = Counter()
    for ch in sorted(by_channel):
        c = by_channel[ch]
        n = sum(c.values())
        k = c["REVIEW"] + c["BLOCK"]
        lo, hi = wilson(k, n)
        tot.update(c)
        summary["channels"][ch] = {"n": n, "review": c["REVIEW"], "block": c["BLOCK"], "flagged": k,
                                   "share": k / n if n else None, "wilson95": [lo, hi]}
        rows.append(f"| {ch} | {n} | {c['REVIEW']} | {c['BLOCK']} | {k/n:.1%} | {lo:.1%}–{hi:.1%} |")
    n = sum(tot.values())
    k = tot["REVIEW"] + tot["BLOCK"]
    lo, hi = wilson(k, n)
    rows.append(f"| all | {n} | {tot['REVIEW']} | {tot['BLOCK']} | {k/n:.1%} | {lo:.1%}–{hi:.1%} |")
    summary["all"] = {"n": n, "flagged": k, "share": k / n if n else None, "wilson95": [lo, hi]}
    # Per-package view: how many packages have at least one flagged tool.
    pk = defaultdict(lambda: [0, 0])
    for s in scored:
        pk[s["source"]][0] += 1
        pk[s["source"]][1] += s["status"] != "ALLOW"
    flagged = [x for x in scored if x["status"] != "ALLOW"]
    summary["flagged_with_a_rule_finding"] = sum(1 for x in flagged if x["rules"])
    summary["rules_on_flagged"] = dict(Counter(r for x in flagged for r in x["rules"]).most_common(10))
    summary["flagged_field_paths"] = dict(Counter(
        re.sub(r"\.properties\.[^.]+", ".properties.*", x["path"] or "none") for x in flagged).most_common(8))
    summary["packages_with_a_flagged_item"] = sum(1 for v in pk.values() if v[1])
    summary["packages"] = len(pk)
    scored.sort(key=lambda s: -s["score"])
    summary["top"] = scored[: a.top]
    (DIR / f"scan_{a.preset}.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    print("\n".join(rows))
    print(f"\nflagged items with a rule finding: {summary['flagged_with_a_rule_finding']} of {len(flagged)}; "
          f"fields the lexical stage named: {summary['flagged_field_paths']}; "
          f"rules: {summary['rules_on_flagged']}")
    print(f"\npackages with at least one flagged item: {summary['packages_with_a_flagged_item']} of {len(pk)}\n")
    print("| # | package | tool / origin | score | status | field |\n|---|---|---|---:|---|---|")
    for i, s in enumerate(scored[: a.top], 1):
        print(f"| {i} | {s['source']} | {s['tool'] or s['origin']} | {s['score']:.3f} | {s['status']} | `{s['path']}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
