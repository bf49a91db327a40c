#!/usr/bin/env python3
"""Flag and denial rates of `portcullis eval` decision records by text length.

Usage:
    SUBSET=test python3 scripts/eval_by_length.py OUT/records/NAME.jsonl [MORE.jsonl ...]

Reads the decision records `portcullis eval --out OUT` writes (first pass only, one
subset: $SUBSET, default `test`), groups the text records (tool definitions have no
single text and are left out) by the UTF-8 length of their text, and prints one
Markdown table: per length bucket and label, each configuration's flag rate (REVIEW
or BLOCK) with its Wilson 95% interval and its denial rate (BLOCK). Used in
docs/eval.md ("Known: a text over 2,048 bytes is scored another way").
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "harvest"))
from scan_harvest import wilson  # noqa: E402  (bounds as fractions)

BUCKETS = [(0, 512), (513, 2048), (2049, 4096), (4097, None)]


def bucket_of(n):
    for lo, hi in BUCKETS:
        if n >= lo and (hi is None or n <= hi):
            return (lo, hi)
    raise ValueError(n)


def name_of(b):
    lo, hi = b
    return f"{lo}-{hi} B" if hi is not None else f">{lo - 1} B"


def main(paths, subset):
    rows = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r.get("kind") != "decision" or r.get("run") != 0 or r.get("subset") != subset:
                    continue
                item = r["item"]
                text = item.get("text")
                if text is None:
                    continue
                status = r["decision"]["status"]
                c = rows.setdefault((r["config"], item["label"], bucket_of(len(text.encode()))), [0, 0, 0])
                c[0] += 1
                c[1] += status in ("REVIEW", "BLOCK")
                c[2] += status == "BLOCK"
    configs = sorted({k[0] for k in rows})
    print("| text length | label | " + " | ".join(f"{c} flag | {c} denial" for c in configs) + " |")
    print("|---|---|" + "---|---|" * len(configs))
    for b in BUCKETS:
        for label in ("benign", "malicious"):
            cells = []
            for c in configs:
                n, flag, deny = rows.get((c, label, b), [0, 0, 0])
                if n == 0:
                    cells += ["—", "—"]
                    continue
                lo, hi = wilson(flag, n)
                cells += [f"{100 * flag / n:.2f}% [{100 * lo:.2f}, {100 * hi:.2f}] ({flag}/{n})",
                          f"{100 * deny / n:.2f}% ({deny}/{n})"]
            print(f"| {name_of(b)} | {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:], os.environ.get("SUBSET", "test"))
