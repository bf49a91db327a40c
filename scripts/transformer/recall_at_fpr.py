#!/usr/bin/env python3
"""Recall at fixed FPRs, per channel, from `portcullis eval` decision records.

For each configuration's records (run 0) and each channel with both classes: ROC
AUC of the fused score and of each learned stage's score, and the recall the score
reaches when its threshold is set on that channel's benign records of the same
subset so that FPR <= 0.5% and <= 1% (an operating-point-free comparison: the
threshold is read off the evaluated set, so it is an upper bound for a
calibrated preset, whose figures are in report.md).

  python recall_at_fpr.py target/eval-ft/records/*.jsonl
"""
import sys
from collections import defaultdict

from common import decisions


def auc(pos, neg):
    scored = sorted([(s, 1) for s in pos] + [(s, 0) for s in neg])
    rank, i, sum_pos = 1, 0, 0.0
    while i < len(scored):
        j = i
        while j < len(scored) and scored[j][0] == scored[i][0]:
            j += 1
        mid = (rank + rank + (j - i) - 1) / 2
        sum_pos += mid * sum(1 for k in range(i, j) if scored[k][1])
        rank += j - i
        i = j
    return (sum_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def recall_at(pos, neg, fpr):
    neg = sorted(neg, reverse=True)
    allowed = int(fpr * len(neg))  # benign records allowed at or above the threshold
    t = neg[allowed] if allowed < len(neg) else float("-inf")
    return sum(1 for s in pos if s > t) / len(pos), allowed


def main(paths):
    print("| config | subset | channel | score | malicious | benign | ROC AUC | recall @ FPR<=0.5% | recall @ FPR<=1% |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        groups = defaultdict(lambda: ([], []))
        config = None
        for r in decisions([path]):
            config = r["config"]
            item, d = r["item"], r["decision"]
            scores = {"fused": d["score"]}
            for st in d["stages"]:
                if st["name"] in ("lexical", "embedding") and st.get("score") is not None:
                    scores[st["name"]] = st["score"]
            mal = item["label"] == "malicious"
            for ch in (item["channel"], "all"):
                for name, s in scores.items():
                    groups[(r["subset"], ch, name)][0 if mal else 1].append(s)
        for (subset, ch, name), (pos, neg) in sorted(groups.items()):
            if len(pos) < 30 or len(neg) < 100:
                continue
            r05, a05 = recall_at(pos, neg, 0.005)
            r1, a1 = recall_at(pos, neg, 0.01)
            print(f"| {config} | {subset} | {ch} | {name} | {len(pos)} | {len(neg)} | {auc(pos, neg):.4f} | {100*r05:.1f}% | {100*r1:.1f}% |")


if __name__ == "__main__":
    main(sys.argv[1:])
