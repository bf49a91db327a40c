#!/usr/bin/env python3
"""Write the loader's splits into corpus/harvest/MANIFEST.json.

The harvest scripts record each package's split with split_of(package), but the
Rust loader (portcullis-eval harvest::load_dir) gives all packages of one upstream
(Debian's python3-django and PyPI's django) the split of the first of them. After a
harvest run, build the corpus with the harvest and let this script copy the splits
the loader assigned into the manifest:

    target/debug/portcullis corpus build --harvest corpus/harvest --out /tmp/harv.jsonl
    python3 scripts/harvest/sync_splits.py /tmp/harv.jsonl

`cargo test --test harvest` fails while the manifest and the loader disagree.
"""
import collections
import json
import sys

MANIFEST = "corpus/harvest/MANIFEST.json"
FILE_PREFIX = {
    "tool_definition.jsonl": "harvest_tool_definition",
    "server_instructions.jsonl": "harvest_server_instructions",
    "prompt.jsonl": "harvest_prompt",
    "resource.jsonl": "harvest_resource",
    "texts.jsonl.gz": "harvest_text",
    "results.jsonl.gz": "harvest_result",
}


def main(built: str) -> None:
    split, count = {}, collections.Counter()
    with open(built, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["provenance"] != "harvested":
                continue
            split[r["lineage_group"]] = r["split"]
            count[(r["id"].split("-")[0], r["split"])] += 1
    with open(MANIFEST, encoding="utf-8") as f:
        m = json.load(f)
    moved = []

    def fix(group, entry):
        if group in split and entry.get("split") != split[group]:
            moved.append((group, entry.get("split"), split[group]))
            entry["split"] = split[group]

    for name, prefix in FILE_PREFIX.items():
        if name in m["files"]:
            m["files"][name]["splits"] = {s: count[(prefix, s)] for s in ("train", "dev", "test")}
    for e in m["packages"]:
        if e.get("status") == "listed":
            fix(f"{e['ecosystem']}:{e['package']}", e)
    for group, e in m["files"].get("texts.jsonl.gz", {}).get("packages", {}).items():
        fix(group, e)
    for e in m.get("results", {}).get("data_packages", []):
        fix(e["package"], e)
    with open(MANIFEST, "w", encoding="utf-8") as f:
        f.write(json.dumps(m, indent=1, ensure_ascii=False) + "\n")
    for g, a, b in moved:
        print(f"{g}: {a} -> {b}")
    print(f"{len(moved)} packages moved to their upstream's split")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
