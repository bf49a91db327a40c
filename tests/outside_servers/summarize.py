"""Table of work/*/result.json."""
import os
import json
from pathlib import Path
order = "desktop-commander mcp-obsidian obsidian-mcp mcp-server-commands dbhub mcp-ripgrep mcp-taskmanager shrimp-task-manager mcp-shell-server mcp-text-editor markitdown-mcp tree-sitter analyzer json-yaml-toml python-interpreter basic-memory text-editor-sweep markitdown-sweep mcp-obsidian-sweep dbhub-tickets".split()
print("| server | package@version | listed t/r/rt/p | steps | items inspected | interventions | withheld | notices | differences | direct step errors |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
for n in order:
    p = Path(os.environ.get("OUTSIDE_WORK", "/tmp/portcullis-outside")) / "work" / n / "result.json"
    if not p.exists():
        print(f"| {n} | (no result) |"); continue
    r = json.loads(p.read_text())
    l = r["listed"]
    iv = ", ".join(f"{h['channel']}:{h.get('tool') or ''} {h['status']}/{h['action']}" for h in r["interventions"])
    print(f"| {n} | {r['package']}@{r['version']} | {l['tools']}/{l['resources']}/{l['templates']}/{l['prompts']} | {r['steps']} | {r['items']} | {len(r['interventions'])} ({iv}) | {len(r['withheld'])} | {len(r['notices'])} | {len(r['diffs'])} | {len(r['step_errors_direct'])} |")
print()
for n in order:
    p = Path(os.environ.get("OUTSIDE_WORK", "/tmp/portcullis-outside")) / "work" / n / "result.json"
    if not p.exists():
        continue
    r = json.loads(p.read_text())
    for w in r["withheld"]:
        print(f"- {n}: WITHHELD {w}")
    for d in r["diffs"]:
        print(f"- {n}: DIFF {d[:400]}")
