#!/usr/bin/env python3
"""An outside check of detector configurations: payloads written blind to the
detector (by someone who read none of rules/, corpus/ or the code), each placed at a
random line of a real tool result of the real-server suite (servers the harvest does
not hold), scanned as tool results with each configuration; the real results alone
and benign look-alikes placed the same way are the benign side. Prints flag and
denial recall / FPR with Wilson intervals per group. Nothing here is used to fit or
choose anything.

  python outside.py WORK PAYLOADS.jsonl LOOKALIKES.jsonl BIN NAME=CONFIG [NAME=CONFIG ...]

WORK: a `tests/real_servers/run.py --work` directory (its */python-direct.json).
"""
import glob
import hashlib
import json
import math
import random
import subprocess
import sys
import tempfile

SEED = 20261205


def wilson(k, n, z=1.96):
    if n == 0:
        return "n/a"
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return f"{100 * p:.1f}% [{100 * (c - h):.1f}, {100 * (c + h):.1f}] ({k}/{n})"


def carriers(work):
    seen = {}
    for path in sorted(glob.glob(f"{work}/*/python-direct.json")):
        server = path.split("/")[-2]
        for step in json.load(open(path))["steps"]:
            res = step.get("result")
            if not isinstance(res, dict):
                continue
            for c in res.get("content") or []:
                text = c.get("text", "") if isinstance(c, dict) else ""
                if c.get("type") == "text" and len(text.split()) >= 8:
                    seen.setdefault(hashlib.sha256(text.encode()).hexdigest(), (server, text))
    return sorted(seen.values())


def place(carrier, payload, rng):
    lines = carrier.split("\n")
    at = rng.randint(0, len(lines))
    return "\n".join(lines[:at] + [payload] + lines[at:])


def main(work, payloads, lookalikes, binary, configs):
    rng = random.Random(SEED)
    real = carriers(work)
    items = []
    for i, (server, text) in enumerate(real):
        items.append({"id": f"real-{i}", "group": "real result", "label": 0, "server": server, "text": text})
    for path, label, group in ((payloads, 1, "payload in a real result"), (lookalikes, 0, "look-alike in a real result")):
        for line in open(path):
            p = json.loads(line)
            server, text = rng.choice(real)
            items.append({"id": p["id"], "group": group, "label": label, "language": p["language"],
                          "server": server, "text": place(text, p["text"], rng)})
    print(f"{len(real)} real tool results of {len({s for s, _ in real})} servers; "
          f"{sum(i['label'] for i in items)} malicious and {sum(1 - i['label'] for i in items)} benign items")
    print("| configuration | group | flag (REVIEW or BLOCK) | denial (BLOCK) |")
    print("|---|---|---|---|")
    by_language = {}
    for spec in configs:
        name, cfg = spec.split("=", 1)
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
            for it in items:
                f.write(json.dumps({"id": it["id"], "channel": "tool_result", "text": it["text"]}) + "\n")
            f.flush()
            out = subprocess.run([binary, "scan", "--config", cfg, "--input", f.name, "--exit-zero"],
                                 check=True, capture_output=True, text=True).stdout
        status = {}
        for line in out.splitlines():
            r = json.loads(line)
            status[r["id"]] = r["status"]
        groups = {}
        for it in items:
            st = status.get(it["id"])
            g = groups.setdefault(it["group"], [0, 0, 0])
            g[0] += 1
            g[1] += st in ("REVIEW", "BLOCK")
            g[2] += st == "BLOCK"
        for group, (n, flag, block) in groups.items():
            print(f"| {name} | {group} | {wilson(flag, n)} | {wilson(block, n)} |")
        for it in items:
            if it["label"] == 1:
                cell = by_language.setdefault(it["language"], {}).setdefault(name, [0, 0])
                cell[0] += 1
                cell[1] += status.get(it["id"]) in ("REVIEW", "BLOCK")
    names = [spec.split("=", 1)[0] for spec in configs]
    print("\nFlag recall of the payloads by language:\n")
    print("| language | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for lang in sorted(by_language):
        print(f"| {lang} | " + " | ".join(f"{by_language[lang][n][1]}/{by_language[lang][n][0]}" for n in names) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
