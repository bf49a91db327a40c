#!/bin/bash
# Every server of new_servers.py, one at a time, direct then behind the gateway
# ($PORTCULLIS, default target/release/portcullis), then the table.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY="$REPO/.interop/venv/bin/python"
W=${OUTSIDE_WORK:-/tmp/portcullis-outside}
mkdir -p "$W"
for s in ${*:-desktop-commander mcp-obsidian obsidian-mcp mcp-server-commands dbhub mcp-ripgrep mcp-taskmanager shrimp-task-manager mcp-shell-server mcp-text-editor markitdown-mcp tree-sitter analyzer json-yaml-toml python-interpreter basic-memory text-editor-sweep markitdown-sweep mcp-obsidian-sweep dbhub-tickets}; do
  echo "##### $s $(date +%T)"
  timeout 600 "$PY" "$HERE/drive.py" "$s" > "$W/work-$s.out" 2>&1; echo "rc=$?"
done
"$PY" "$HERE/summarize.py" > "$W/summary.md"
echo "table: $W/summary.md; each intervention with its original text: $PY $HERE/originals.py"
