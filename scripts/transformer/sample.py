#!/usr/bin/env python3
"""A seeded sample of a built corpus, small enough for a transformer on 2 cores:
N dev records (to calibrate on), N test records and every rules_blind record (to
evaluate on). The records are copied unchanged (split, lineage, provenance), so
`calibrate` reads the dev ones and `eval` the test and rules_blind ones.

  python sample.py FULL.jsonl OUT.jsonl [--dev 3000] [--test 3000] [--seed 20261204]
"""
import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--dev", type=int, default=3000)
    ap.add_argument("--test", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20261204)
    args = ap.parse_args()
    by = {"dev": [], "test": [], "rules_blind": []}
    with open(args.corpus) as fh:
        for line in fh:
            split = json.loads(line).get("split")
            if split in by:
                by[split].append(line)
    rng = random.Random(args.seed)
    dev = rng.sample(by["dev"], min(args.dev, len(by["dev"])))
    test = rng.sample(by["test"], min(args.test, len(by["test"])))
    with open(args.out, "w") as fh:
        fh.writelines(dev + test + by["rules_blind"])
    print(f"{args.out}: {len(dev)} dev, {len(test)} test, {len(by['rules_blind'])} rules_blind records")


if __name__ == "__main__":
    main()
