"""Print every intervention of work/*/result.json with the original text it acted on (from the direct transcript)."""
import os
import json, sys
from pathlib import Path
for rp in sorted((Path(os.environ.get("OUTSIDE_WORK", "/tmp/portcullis-outside")) / "work").glob("*/result.json")):
    r = json.loads(rp.read_text())
    if not r["interventions"]:
        continue
    d = json.loads((rp.parent / "direct.json").read_text())
    g = json.loads((rp.parent / "gateway.json").read_text())
    for h in r["interventions"]:
        print("=" * 100)
        print(f"{r['server']}@{r['version']} channel={h['channel']} tool={h.get('tool')} status={h['status']} action={h['action']} score={h['score']:.3f} thresholds={h.get('thresholds')}")
        for st in h.get("stages") or []:
            if st.get("findings") or st.get("label") not in ("clean", None):
                print("  stage", st["name"], "score", round(st.get("score", 0), 3), "label", st.get("label"), "findings", json.dumps(st.get("findings"), ensure_ascii=False), "evidence", json.dumps(st.get("evidence"), ensure_ascii=False)[:400])
        for x in h.get("reasons") or []:
            print("  reason:", x)
        orig = None
        if h["channel"] == "tool_definition":
            orig = next((t for t in d["tools"] if t["name"] == h["tool"]), None)
            orig = orig and orig.get("description")
        elif h["channel"] == "tool_result":
            for s in d["steps"]:
                if s["name"] == h["tool"] and s["result"]:
                    orig = json.dumps(s["result"].get("content"), ensure_ascii=False)
                    if "portcullis:" not in json.dumps(g["steps"][d["steps"].index(s)]["result"] or g["steps"][d["steps"].index(s)]["error"]) and h["action"] != "sanitize":
                        continue
                    break
        elif h["channel"] == "tool_arguments":
            orig = json.dumps(next((s["args"] for s in d["steps"] if s["name"] == h["tool"]), None), ensure_ascii=False)
        print("  ORIGINAL:", orig if orig is None or len(sys.argv) > 1 else orig[:3000])
