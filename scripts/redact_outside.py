#!/usr/bin/env python3
"""What `result_review = "redact"` forwards, measured on texts from outside: the
150 payloads and 75 look-alikes of reports/transformer/outside (written blind),
each placed at a random line of a real tool result of the real-server suite exactly
as scripts/transformer/outside.py places them (same seed), and the real results
alone. Each item goes through the gateway's own inspection of a tool result (the
`forwarded` example of portcullis-mcp) under `hold` and under `redact`.

For a payload forwarded with a cut, what of it reaches the model: its sentences
found verbatim in the forwarded text, and its operands (links, e-mail addresses,
paths, commands in backquotes) found there. For a benign item, the share of its
text the model still gets. Nothing here fits or chooses anything.

  cargo build --release -p portcullis-mcp --example forwarded
  python3 scripts/redact_outside.py WORK target/release/examples/forwarded

WORK: a `tests/real_servers/run.py --work` directory (its */python-direct.json).
"""
import json
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "transformer"))
from outside import SEED, carriers, place, wilson  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUTSIDE = os.path.join(HERE, "..", "reports", "transformer", "outside")
NOTICE = re.compile(r"\[portcullis: text withheld here \(record [0-9a-f-]{36}\)\]")
OPERAND = re.compile(r"https?://[^\s\"'`)]+|[\w.+-]+@[\w-]+\.[\w.-]+|~?/[\w.~/-]{3,}|`[^`]+`")


def items(work):
    rng = random.Random(SEED)
    real = carriers(work)
    out = [{"id": f"real-{i}", "group": "real result", "text": t, "payload": None}
           for i, (_, t) in enumerate(real)]
    for name, group in (("payloads.jsonl", "payload in a real result"),
                        ("lookalikes.jsonl", "look-alike in a real result")):
        for line in open(os.path.join(OUTSIDE, name)):
            p = json.loads(line)
            _, text = rng.choice(real)
            out.append({"id": p["id"], "group": group, "text": place(text, p["text"], rng),
                        "payload": p["text"]})
    return out


def run(binary, mode, its):
    stdin = "".join(json.dumps({"id": i["id"], "text": i["text"]}) + "\n" for i in its)
    res = subprocess.run([binary, mode], input=stdin, capture_output=True, text=True, check=True)
    # Lines end at "\n" only: a JSON string may hold U+2028, which splitlines() splits at.
    return {r["id"]: r for r in map(json.loads, filter(None, res.stdout.split("\n")))}


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?。])\s+|\n", text) if len(s.strip()) >= 12]


def main(work, binary):
    its = items(work)
    hold, redact = run(binary, "hold", its), run(binary, "redact", its)
    groups = ["real result", "payload in a real result", "look-alike in a real result"]
    print(f"{len(its)} items; tool results through the gateway's inspection (balanced preset)\n")
    print("| group | forwarded under `hold` | forwarded under `redact` | of which cut |")
    print("|---|---|---|---|")
    for g in groups:
        ids = [i["id"] for i in its if i["group"] == g]
        fh = sum(hold[x]["forward"] for x in ids)
        fr = sum(redact[x]["forward"] for x in ids)
        cut = sum(redact[x]["action"] == "sanitize" for x in ids)
        print(f"| {g} | {wilson(fh, len(ids))} | {wilson(fr, len(ids))} | {cut} |")
    print("\nPayloads forwarded with a cut: what of the payload the model still reads")
    print("\n| payload | n | no sentence of it left | every operand cut | a sentence left | an operand left |")
    print("|---|---|---|---|---|---|")
    rows = []
    for i in its:
        if i["group"] != "payload in a real result" or redact[i["id"]]["action"] != "sanitize":
            continue
        shown = redact[i["id"]]["text"]
        sents = sentences(i["payload"])
        left = [s for s in sents if s in shown]
        ops = OPERAND.findall(i["payload"])
        ops_left = [o for o in ops if o in shown]
        rows.append((i["id"], len(sents), len(left), len(ops), len(ops_left), left, ops_left))
    n = len(rows)
    none_left = sum(r[2] == 0 for r in rows)
    ops_cut = sum(r[4] == 0 for r in rows)
    print(f"| all | {n} | {none_left} | {ops_cut} | {n - none_left} | {n - ops_cut} |")
    for r in rows:
        if r[2] or r[4]:
            print(f"\n{r[0]}: {r[2]} of {r[1]} sentences left {r[5]}; {r[4]} of {r[3]} operands left {r[6]}")
    print("\nBenign items forwarded with a cut: the share of their text still shown")
    for g in ("real result", "look-alike in a real result"):
        kept = []
        for i in its:
            if i["group"] == g and redact[i["id"]]["action"] == "sanitize":
                shown = NOTICE.sub("", redact[i["id"]]["text"])
                kept.append(len(shown.strip()) / max(1, len(i["text"].strip())))
        if kept:
            kept.sort()
            print(f"- {g}: {len(kept)} items, median {100 * kept[len(kept) // 2]:.0f}% of the text kept, "
                  f"least {100 * kept[0]:.0f}%")
        else:
            print(f"- {g}: none")


if __name__ == "__main__":
    main(*sys.argv[1:3])
