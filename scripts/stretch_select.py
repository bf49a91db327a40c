#!/usr/bin/env python3
"""How the lexical stage's stretch cap was chosen (docs/eval.md, "A long text scores
no higher than its loudest stretch"): on the DEV split only.

Scans every record of the split whole and each of its stretches alone with a binary
that has no cap (the binary of main before it, e.g. daf20928), then replaces each
record's lexical score by min(whole, loudest stretch / f) from 0.1 up and prints, per
channel, the recall at a fixed flag FPR of the fused score (0.5%, 1%, 2%, 5%) and the
records flagged at the configured thresholds, before and after.

  python3 scripts/stretch_select.py BIN CORPUS.jsonl OUTDIR [--len 512] [--lines]

--lines: stretches are runs of whole lines of at most --len bytes, one starting at
least every --len/2 bytes (the first version); default: --len-byte windows
overlapping by half on character boundaries (what shipped). Tool definitions (records
with a `tool` object) are scanned whole only.
"""
import argparse
import collections
import json
import subprocess
from pathlib import Path


def byte_windows(b, size):
    def snap(i):
        while i < len(b) and (b[i] & 0xC0) == 0x80:
            i -= 1
        return i
    out, start = [], 0
    while True:
        end = min(start + size, len(b))
        end = snap(end) if end < len(b) else end
        out.append((start, end))
        if end >= len(b):
            return out
        start = snap(start + size // 2)


def line_runs(b, size):
    lines, at = [], 0
    for line in b.splitlines(keepends=True):
        body = line.rstrip(b"\r\n")
        if body.strip():
            lines.append((at, at + len(body)))
        at += len(line)
    out, i = [], 0
    while i < len(lines):
        s, e = lines[i]
        j = i + 1
        while j < len(lines) and lines[j][1] - s <= size:
            e = lines[j][1]
            j += 1
        out.append((s, e))
        if j == len(lines):
            break
        k = i + 1
        while k < j and lines[k][0] < s + size // 2:
            k += 1
        i = k
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--len", type=int, default=512)
    ap.add_argument("--lines", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    records, items = {}, []
    for line in open(a.corpus):
        r = json.loads(line)
        if r.get("split") != "dev":
            continue
        records[r["id"]] = r
        if r.get("text") is None:
            items.append({"id": r["id"] + "#whole", "tool": r["tool"], "channel": r["channel"]})
            continue
        items.append({"id": r["id"] + "#whole", "text": r["text"], "channel": r["channel"]})
        b = r["text"].encode()
        if len(b) <= a.len:
            continue
        spans = line_runs(b, a.len) if a.lines else byte_windows(b, a.len)
        for k, (s, e) in enumerate(spans):
            items.append({"id": f"{r['id']}#s{k}", "text": b[s:e].decode(), "channel": r["channel"]})
    (out / "in.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    with open(out / "out.jsonl", "w") as f:
        subprocess.run([a.bin, "scan", "--input", str(out / "in.jsonl")], stdout=f, check=False)
    whole, loudest = {}, collections.defaultdict(float)
    for line in open(out / "out.jsonl"):
        d = json.loads(line)
        rid, part = d["id"].rsplit("#", 1)
        lex = next((s["score"] for s in d["stages"] if s["name"] == "lexical"), 0.0)
        if part == "whole":
            whole[rid] = (d["score"], lex, d["thresholds"]["review"], d["channel"])
        else:
            loudest[rid] = max(loudest[rid], lex)

    def capped(rid, f):
        fused, lex, _, _ = whole[rid]
        if rid not in loudest or lex < 0.1:
            return fused
        cap = min(lex, loudest[rid] / f)
        other = 1 - (1 - fused) / (1 - lex) if lex < 1 else 0
        return 1 - (1 - other) * (1 - cap)

    def recall_at(scores, fpr, chans):
        keep = [r for r in scores if chans is None or whole[r][3] in chans]
        benign = sorted((scores[r] for r in keep if records[r]["label"] == "benign"), reverse=True)
        mal = [scores[r] for r in keep if records[r]["label"] == "malicious"]
        t = benign[int(fpr * len(benign))] if benign else 0
        return sum(1 for x in mal if x > t) / max(len(mal), 1)

    def flagged(scores, chans, label):
        return sum(1 for r, s in scores.items() if records[r]["label"] == label and s >= 1
                   and (chans is None or whole[r][3] in chans))

    before = {r: v[0] / v[2] for r, v in whole.items()}
    for name, chans in [("all", None), ("tool_result", {"tool_result"}), ("resource", {"resource"})]:
        print(f"{name:12s} before: " + " ".join(f"{recall_at(before, f, chans):.3f}" for f in (0.005, 0.01, 0.02, 0.05)))
        for f in (0.5, 0.75, 1.0):
            after = {r: capped(r, f) / whole[r][2] for r in whole}
            print(f"   f={f}: " + " ".join(f"{recall_at(after, x, chans):.3f}" for x in (0.005, 0.01, 0.02, 0.05))
                  + f"   flagged benign {flagged(before, chans, 'benign')} -> {flagged(after, chans, 'benign')},"
                  f" malicious {flagged(before, chans, 'malicious')} -> {flagged(after, chans, 'malicious')}")


if __name__ == "__main__":
    main()
