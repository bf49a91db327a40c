#!/bin/bash
# Installs the 16 servers of new_servers.py, at the versions they were measured
# with, into $OUTSIDE_WORK (default /tmp/portcullis-outside). Needs the project's
# .interop (scripts/setup-interop.sh: Node, the Python SDK client), an npm, ripgrep
# (mcp-ripgrep) and a Python 3.13 (pyenv's 3.13.0 here) for three of them.
# Not part of `make test`: a measurement from outside, run by hand.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
W=${OUTSIDE_WORK:-/tmp/portcullis-outside}
PY313=${PY313:-$(pyenv root 2>/dev/null)/versions/3.13.0/bin/python3.13}
# The npm registry's `node` package ships node without npm: a self-contained
# npm on PATH (the nodejs.org or NodeSource build; Debian's needs Debian's node)
# runs under .interop's node, which is first on PATH below.
NPM=${NPM:-$(command -v npm || true)}
[ -n "$NPM" ] || { echo "setup: npm missing (install the nodejs.org or NodeSource build, or set NPM)" >&2; exit 2; }
export PATH="$REPO/.interop/node_modules/node/bin:$PATH"
mkdir -p "$W/npm"
command -v rg >/dev/null || { echo "setup: ripgrep missing (apt-get install -y ripgrep)" >&2; exit 2; }
cd "$W/npm"
[ -f package.json ] || echo '{"name":"outside-servers","private":true}' > package.json
PUPPETEER_SKIP_DOWNLOAD=1 "$NPM" install --no-audit --no-fund --prefix "$W/npm" \
  @wonderwhy-er/desktop-commander@0.2.52 mcp-obsidian@1.0.0 obsidian-mcp@2.0.1 \
  mcp-server-commands@0.5.0 @bytebase/dbhub@1.4.0 mcp-ripgrep@0.4.0 \
  @kazuph/mcp-taskmanager@1.1.1 mcp-shrimp-task-manager@1.0.21
venv() { # NAME PYTHON SPEC...
  local n=$1 py=$2; shift 2
  [ -x "$W/venv-$n/bin/python" ] || "$py" -m venv "$W/venv-$n"
  "$W/venv-$n/bin/pip" install -q "$@"
}
venv mcp-shell-server python3 mcp-shell-server==1.1.14
venv markitdown-mcp python3 markitdown-mcp==0.0.1a8
venv mcp-json-yaml-toml python3 mcp-json-yaml-toml==0.10.2
# These two import mcp 1.x only (2.3.0 fails at import).
venv mcp-server-tree-sitter python3 mcp-server-tree-sitter==0.7.0 "mcp<2"
venv mcp-python-interpreter python3 mcp-python-interpreter==1.2.3 mcp==1.30.0
# Python >= 3.12 / 3.13.
venv mcp-text-editor "$PY313" mcp-text-editor==1.2.2
venv mcp-server-analyzer "$PY313" mcp-server-analyzer==0.4.1
venv basic-memory "$PY313" basic-memory==0.24.1
echo "setup: servers installed in $W"
