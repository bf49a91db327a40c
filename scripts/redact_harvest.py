#!/usr/bin/env python3
"""What `result_review = "redact"` does to real benign tool results: the benign
results of corpus/harvest/results.jsonl.gz (real servers' answers on real package
data, each with its provenance) through the gateway's own inspection of a tool
result (the `forwarded` example of portcullis-mcp), under `hold` and `redact`.
Prints, by text length, how many the default preset flags, how many are withheld
under each setting, the share of text a redacted one keeps, and why the others are
still withheld. Nothing here fits or chooses anything.

  cargo build --release -p portcullis-mcp --example forwarded
  python3 scripts/redact_harvest.py target/release/examples/forwarded
"""
import collections
import gzip
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redact_outside import NOTICE, run, wilson  # noqa: E402

HARVEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "harvest",
                       "results.jsonl.gz")
BINS = ((512, "≤ 512 B"), (2048, "513 B – 2 KiB"), (4096, "2 – 4 KiB"), (None, "> 4 KiB"))


def length_bin(n):
    return next(name for top, name in BINS if top is None or n <= top)


def main(binary):
    its = []
    with gzip.open(HARVEST, "rt") as f:
        for line in f:
            r = json.loads(line)
            if r["label"] == "benign":
                its.append({"id": r["id"], "text": r["text"], "source": r["source"]})
    hold, redact = run(binary, "hold", its), run(binary, "redact", its)
    print(f"{len(its)} benign real tool results (corpus/harvest), default preset\n")
    print("| length | n | flagged | withheld under `hold` | withheld under `redact` | forwarded with a cut |")
    print("|---|---|---|---|---|---|")
    for _, name in BINS:
        ids = [i["id"] for i in its if length_bin(len(i["text"])) == name]
        if not ids:
            continue
        flagged = sum(hold[x]["status"] != "ALLOW" for x in ids)
        wh = sum(not hold[x]["forward"] for x in ids)
        wr = sum(not redact[x]["forward"] for x in ids)
        cut = sum(redact[x]["action"] == "sanitize" for x in ids)
        print(f"| {name} | {len(ids)} | {wilson(flagged, len(ids))} | {wilson(wh, len(ids))} | "
              f"{wilson(wr, len(ids))} | {cut} |")
    text = {i["id"]: i["text"] for i in its}
    kept = sorted(len(NOTICE.sub("", redact[x]["text"]).strip()) / max(1, len(text[x].strip()))
                  for x in redact if redact[x]["action"] == "sanitize")
    if kept:
        print(f"\nText a redacted result keeps: median {100 * kept[len(kept) // 2]:.0f}%, "
              f"quartile {100 * kept[len(kept) // 4]:.0f}%, least {100 * kept[0]:.0f}% ({len(kept)} results)")
    why = collections.Counter()
    servers = collections.Counter()
    for i in its:
        o = redact[i["id"]]
        if not o["forward"]:
            why[re.sub(r"\d+(\.\d+)?", "N", " / ".join(o.get("redact") or ["(no reason)"]))] += 1
            servers[i["source"]] += 1
    print("\nWhy the rest are withheld under `redact`:\n")
    for k, v in why.most_common():
        print(f"- {v}: {k}")
    print("\nTheir servers:\n")
    for k, v in servers.most_common(8):
        print(f"- {v}: {k}")


if __name__ == "__main__":
    main(sys.argv[1])
