#!/usr/bin/env python3
"""How much traffic reached each stage, and the decision latency, from `portcullis
eval` decision records (run 0): per configuration and subset, the share of benign
and malicious records on which the embedding (transformer) stage ran, and p50 /
p95 / p99 of the whole decision's latency and of the stage's own.

  python cascade_share.py target/eval-ft2/records/*.jsonl
"""
import sys
from collections import defaultdict

from common import decisions


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main(paths):
    print("| config | subset | benign records the transformer read | malicious records it read | decision p50 / p95 / p99 ms | transformer p50 / p95 ms (where it ran) |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        g = defaultdict(lambda: {"b": [0, 0], "m": [0, 0], "lat": [], "emb": []})
        config = None
        for r in decisions([path]):
            config = r["config"]
            d = r["decision"]
            s = g[r["subset"]]
            emb = [st for st in d["stages"] if st["name"] == "embedding"]
            k = "m" if r["item"]["label"] == "malicious" else "b"
            s[k][0] += bool(emb)
            s[k][1] += 1
            s["lat"].append(d["latency_us"] / 1000)
            s["emb"].extend(st["latency_us"] / 1000 for st in emb)
        for subset, s in sorted(g.items()):
            share = lambda k: f"{s[k][0]}/{s[k][1]} ({100 * s[k][0] / s[k][1]:.1f}%)" if s[k][1] else "n/a"
            lat = " / ".join(f"{pct(s['lat'], q):.1f}" for q in (0.5, 0.95, 0.99))
            emb = " / ".join(f"{pct(s['emb'], q):.1f}" for q in (0.5, 0.95)) if s["emb"] else "n/a"
            print(f"| {config} | {subset} | {share('b')} | {share('m')} | {lat} | {emb} |")


if __name__ == "__main__":
    main(sys.argv[1:])
