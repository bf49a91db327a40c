#!/usr/bin/env python3
"""Decision latency on 1 KiB and 64 KiB items (issue 23's cascade figures): builds
tool results of exactly those sizes from harvested benign test texts of a sample
(seeded), runs `portcullis scan` on them with each configuration, one process per
configuration and size, and prints p50 / p95 / p99 / max of the records'
`latency_us` and the share of items the embedding stage read.

  python latency.py SAMPLE.jsonl BIN NAME=CONFIG.toml [NAME=CONFIG.toml ...]
"""
import json
import random
import subprocess
import sys
import tempfile


def build(texts, size, n, rng):
    items = []
    for i in range(n):
        buf = ""
        while len(buf.encode()) < size:
            buf += rng.choice(texts) + "\n"
        text = buf.encode()[:size].decode("utf-8", "ignore")
        items.append({"id": f"{size}-{i}", "channel": "tool_result", "text": text})
    return items


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(sample, binary, configs):
    rng = random.Random(20261205)
    texts = []
    with open(sample) as fh:
        for line in fh:
            r = json.loads(line)
            if (r["split"] == "test" and r["label"] == "benign" and r.get("provenance") == "harvested"
                    and "text" in r and r["channel"] in ("tool_result", "resource")):
                texts.append(r["text"])
    sizes = [(1024, 300), (65536, 40)]
    print(f"{len(texts)} harvested benign test texts; items: " + ", ".join(f"{n} of {s} bytes" for s, n in sizes))
    print("| configuration | item | n | p50 ms | p95 ms | p99 ms | max ms | items the transformer read |")
    print("|---|---|---|---|---|---|---|---|")
    # The same items for every configuration.
    built = {size: build(texts, size, n, rng) for size, n in sizes}
    for spec in configs:
        name, cfg = spec.split("=", 1)
        for size, _ in sizes:
            items = built[size]
            with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
                f.write("".join(json.dumps(i) + "\n" for i in items))
                f.flush()
                out = subprocess.run([binary, "scan", "--config", cfg, "--input", f.name, "--exit-zero"],
                                     check=True, capture_output=True, text=True).stdout
            recs = [json.loads(l) for l in out.splitlines() if l.strip()]
            lat = [r["latency_us"] / 1000 for r in recs]
            read = sum(any(s["name"] == "embedding" for s in r["stages"]) for r in recs)
            print(f"| {name} | {size // 1024} KiB | {len(recs)} | {pct(lat, .5):.1f} | {pct(lat, .95):.1f} | "
                  f"{pct(lat, .99):.1f} | {max(lat):.1f} | {read}/{len(recs)} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
