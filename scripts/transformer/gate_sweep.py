#!/usr/bin/env python3
"""Choose the cascade's gate and channels on dev records (issue 23, item 4): from
`portcullis eval` decision records of a configuration whose transformer read every
item, simulate each gate (the transformer reads an item only when an earlier stage
scored it >= gate or found something on it; the egress guard's findings do not
count, as in the pipeline) and each channel set, and print per
channel the share of benign records the transformer would read and the recall the
fused score reaches at benign FPR <= 0.5% and <= 1% (thresholds read off the same
dev records). Run it on dev records only: what it chooses is then measured on test.

  python gate_sweep.py target/transformer/eval-dev-ft/records/*.jsonl \
      --gates 0,0.1641,0.2849,0.4882 --channels tool_result,resource
"""
import argparse
from collections import defaultdict

from common import decisions
from recall_at_fpr import recall_at


def without_embedding(decision):
    """The fused score had the transformer not read the item: the fusion is a
    noisy-OR of weighted stage scores and the stage's weight is 1, so its factor
    divides out."""
    emb = [st["score"] for st in decision["stages"] if st["name"] == "embedding" and st.get("score") is not None]
    if not emb:
        return decision["score"]
    if emb[0] >= 1.0:
        raise SystemExit("gate_sweep.py: an embedding score of 1 cannot be divided out")
    return 1.0 - (1.0 - decision["score"]) / (1.0 - emb[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records", nargs="+")
    ap.add_argument("--gates", default="0")
    ap.add_argument("--channels", default="", help="channels the transformer reads (empty = all)")
    args = ap.parse_args()
    gates = [float(g) for g in args.gates.split(",")]
    listed = set(filter(None, args.channels.split(",")))
    recs = list(decisions(args.records))
    if any(not any(st["name"] == "embedding" for st in r["decision"]["stages"]) for r in recs):
        raise SystemExit("gate_sweep.py: give records of a configuration whose transformer read every item")
    print(f"{len(recs)} dev records; transformer on {', '.join(sorted(listed)) or 'every channel'}")
    print("| gate | channel | malicious | benign | benign read | malicious read | recall @ FPR<=0.5% | recall @ FPR<=1% |")
    print("|---|---|---|---|---|---|---|---|")
    for g in gates:
        groups = defaultdict(lambda: ([], [], [0, 0]))
        for r in recs:
            item, stages = r["item"], r["decision"]["stages"]
            # The stages that open the gate (Stage::opens_gate): not the egress guard.
            earlier = [st for st in stages if st["name"] not in ("embedding", "egress")]
            found = any(st.get("findings") for st in earlier)
            score = max((st.get("score") or 0.0 for st in earlier), default=0.0)
            reads = (not listed or item["channel"] in listed) and (g == 0 or found or score >= g)
            s = r["decision"]["score"] if reads else without_embedding(r["decision"])
            mal = item["label"] == "malicious"
            for ch in (item["channel"], "all"):
                pos, neg, read = groups[ch]
                (pos if mal else neg).append(s)
                read[0 if mal else 1] += reads
        for ch, (pos, neg, read) in sorted(groups.items()):
            if len(pos) < 30 or len(neg) < 100:
                continue
            r05, _ = recall_at(pos, neg, 0.005)
            r1, _ = recall_at(pos, neg, 0.01)
            print(f"| {g:.4f} | {ch} | {len(pos)} | {len(neg)} | {read[1] / len(neg):.1%} | {read[0] / len(pos):.1%} | "
                  f"{r05:.1%} | {r1:.1%} |")


if __name__ == "__main__":
    main()
