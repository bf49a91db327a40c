#!/usr/bin/env python3
"""The cascade gate read off `portcullis eval` decision records of dev records
(run 0): the given quantile of the lexical stage's score on benign records. Items
the cheap stages score below it, with no finding, are not read by the transformer.

  python gate.py target/transformer/eval-dev/records/*.jsonl --quantile 0.8
"""
import argparse

from common import decisions


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records", nargs="+")
    ap.add_argument("--quantile", type=float, default=0.8)
    args = ap.parse_args()
    scores = []
    for r in decisions(args.records):
        if r["item"]["label"] != "benign":
            continue
        lex = [st["score"] for st in r["decision"]["stages"] if st["name"] == "lexical" and st.get("score") is not None]
        scores.append(max(lex, default=0.0))
    if not scores:
        raise SystemExit("gate.py: no benign decision records with a lexical score")
    scores.sort()
    print(f"{scores[min(len(scores) - 1, int(args.quantile * len(scores)))]:.4f}")


if __name__ == "__main__":
    main()
