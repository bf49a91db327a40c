#!/usr/bin/env bash
# Installs the third-party MCP pieces the gateway's interop tests run against into
# .interop/ at the repository root (git-ignored). Idempotent: a second run with unchanged
# pins does nothing but verify and print. Versions are pinned exactly in
# tests/interop/package.json + package-lock.json (npm) and tests/interop/requirements.txt
# (PyPI).
#
#   .interop/node_modules/node/bin/node   Node.js >= 22 from the npm registry's `node` package
#   .interop/node_modules/@modelcontextprotocol/{sdk,server-everything,server-filesystem,inspector}
#   .interop/venv                          Python venv with the `mcp` SDK
#
# Needs: npm (any node >= 18 to bootstrap), python3 >= 3.10 with venv. Only the npm
# registry and PyPI are contacted.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/tests/interop"
DEST="${PORTCULLIS_INTEROP_DIR:-$ROOT/.interop}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$DEST"
start=$(date +%s)

say() { printf 'setup-interop: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v npm >/dev/null || die "npm not found (install Node.js >= 18 with npm)"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found"

# --- npm part ----------------------------------------------------------------------
stamp_npm="$(cat "$SRC/package.json" "$SRC/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$DEST/.npm-stamp" && "$(cat "$DEST/.npm-stamp")" == "$stamp_npm" && -x "$DEST/node_modules/node/bin/node" ]]; then
    say "npm packages already installed (pins unchanged)"
else
    say "installing npm packages into $DEST (npm install from the committed lock file)"
    cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
    # Not `npm ci`: npm 11 writes a lock that lacks an entry for an optional Windows-only
    # dependency of vite (napi-windows-process-start-time), and `npm ci` then refuses the
    # lock as out of sync. `npm install` installs every locked version as locked and only
    # resolves that missing optional entry. Install scripts must run: the `node` package
    # fetches its platform binary package from the npm registry in its preinstall script.
    (cd "$DEST" && npm install --no-audit --no-fund --loglevel=error >&2)
    echo "$stamp_npm" > "$DEST/.npm-stamp"
fi

NODE="$DEST/node_modules/node/bin/node"
[[ -x "$NODE" ]] || die "$NODE missing: the node package's install script did not run"
node_version="$("$NODE" --version)"
node_major="${node_version#v}"; node_major="${node_major%%.*}"
(( node_major >= 22 )) || die "node from .interop is $node_version, need >= 22"

# --- Python part -------------------------------------------------------------------
stamp_py="$(cat "$SRC/requirements.txt" | sha256sum | cut -d' ' -f1)"
VENV="$DEST/venv"
if [[ -f "$DEST/.py-stamp" && "$(cat "$DEST/.py-stamp")" == "$stamp_py" && -x "$VENV/bin/python" ]]; then
    say "Python venv already installed (pins unchanged)"
else
    say "creating $VENV and installing tests/interop/requirements.txt"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$SRC/requirements.txt" >&2
    echo "$stamp_py" > "$DEST/.py-stamp"
fi

# --- what is installed -------------------------------------------------------------
pkg_version() { "$NODE" -p "require('$DEST/node_modules/$1/package.json').version"; }
echo "installed into $DEST:"
echo "  node                                     $node_version ($NODE)"
echo "  npm (used to install)                    $(npm --version)"
for p in @modelcontextprotocol/sdk @modelcontextprotocol/server-everything @modelcontextprotocol/server-filesystem @modelcontextprotocol/inspector; do
    printf '  %-40s %s\n' "$p" "$(pkg_version "$p")"
done
echo "  python                                   $("$VENV/bin/python" --version 2>&1 | cut -d' ' -f2) ($VENV/bin/python)"
echo "  mcp (PyPI)                               $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
echo "done in $(( $(date +%s) - start )) s"
