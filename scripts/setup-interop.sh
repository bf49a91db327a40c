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
#   .interop/real-servers/node_modules     real MCP servers from npm (tests/real_servers/package.json + lock)
#   .interop/real-servers/py-mcp2, py-mcp1 real MCP servers from PyPI (tests/real_servers/requirements-mcp{2,1}.txt)
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

# --- real servers of tests/real_servers (npm and PyPI, pinned) ---------------------
# Their own prefix and venvs: the servers' SDK versions must not move the clients'. Two
# venvs because PyPI servers written for `mcp` 1.x (FastMCP imports) and 2.x cannot share one.
RS_SRC="$ROOT/tests/real_servers"
RS="$DEST/real-servers"
mkdir -p "$RS"
# The three installs are independent and mostly wait on the network: run them at once.
rs_npm() {
    local stamp
    stamp="$(cat "$RS_SRC/package.json" "$RS_SRC/package-lock.json" | sha256sum | cut -d' ' -f1)"
    if [[ -f "$RS/.npm-stamp" && "$(cat "$RS/.npm-stamp")" == "$stamp" && -d "$RS/node_modules" ]]; then
        say "real-server npm packages already installed (pins unchanged)"
        return
    fi
    say "installing the real-server npm packages into $RS (npm install from the committed lock file)"
    cp "$RS_SRC/package.json" "$RS_SRC/package-lock.json" "$RS/"
    # No install script of these servers is needed, and some would download a browser.
    (cd "$RS" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
    echo "$stamp" > "$RS/.npm-stamp"
}
rs_venv() {
    local gen="$1" req="$RS_SRC/requirements-$1.txt" venv="$RS/py-$1" stamp
    stamp="$(sha256sum < "$req" | cut -d' ' -f1)"
    if [[ -f "$RS/.py-$gen-stamp" && "$(cat "$RS/.py-$gen-stamp")" == "$stamp" && -x "$venv/bin/python" ]]; then
        say "real-server venv py-$gen already installed (pins unchanged)"
        return
    fi
    say "creating $venv and installing tests/real_servers/requirements-$gen.txt"
    rm -rf "$venv" "$RS/.py-$gen-stamp"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2
    echo "$stamp" > "$RS/.py-$gen-stamp"
}
rs_npm & pid_npm=$!
rs_venv mcp2 & pid_mcp2=$!
rs_venv mcp1 & pid_mcp1=$!
wait "$pid_npm" || die "installing tests/real_servers/package-lock.json failed"
wait "$pid_mcp2" || die "installing tests/real_servers/requirements-mcp2.txt failed"
wait "$pid_mcp1" || die "installing tests/real_servers/requirements-mcp1.txt failed"
command -v git >/dev/null || die "git not found (the real-server suite's git servers need it: apt-get install git)"

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
echo "  real servers (tests/real_servers)         $(ls "$RS/node_modules" | wc -l) npm packages, $("$RS/py-mcp2/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l) + $("$RS/py-mcp1/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l) PyPI packages"
echo "done in $(( $(date +%s) - start )) s"
