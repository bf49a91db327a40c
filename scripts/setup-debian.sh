#!/usr/bin/env bash
# Installs the Debian packages the tests drive as real software (idempotent: when
# every package is there, it only prints their versions):
#
#   chromium, chromium-driver   the review page's browser test (tests/review_page.rs)
#   postgresql                  the shared state store's tests: each starts a throw-away
#                               cluster (initdb + pg_ctl; portcullis-testkit/src/pg.rs),
#                               never the package's own
#   openssl                     the TLS test of the shared store makes its CA and certificate
#
# Needs root for apt-get (or sudo); says what to run otherwise.
set -euo pipefail
PKGS=(chromium chromium-driver postgresql openssl)
say() { printf 'setup-debian: %s\n' "$*" >&2; }
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
  command -v apt-get >/dev/null || { say "error: apt-get not found; install ${missing[*]} with your package manager"; exit 1; }
  SUDO=()
  if (( EUID != 0 )); then
    command -v sudo >/dev/null || { say "error: not root and no sudo: run 'apt-get install ${missing[*]}' as root"; exit 1; }
    SUDO=(sudo)
  fi
  say "installing ${missing[*]} (apt-get)"
  "${SUDO[@]}" apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
for p in "${PKGS[@]}"; do
  say "$p $(dpkg-query -W -f='${Version}' "$p")"
done
