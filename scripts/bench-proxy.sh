#!/usr/bin/env bash
# Benchmarks `portcullis proxy` against a direct connection (same rmcp client, same
# upstream, interleaved in one run): rules + lexical with the audit log's default
# durability (group: fsync within 50 ms; with the 100,000-call memory run), then with
# --no-fsync, then with the embedding stage on, then the two floors in the gateway's
# place (a bare byte relay; an rmcp pass-through with no inspection and no log). Release build. Prints Markdown
# tables on stdout. Add --keep-alive for HTTP clients that keep their connections (as
# the Python and TypeScript SDKs do).
#
#   scripts/bench-proxy.sh                 # full run (2000 calls per cell, 100,000-call long run)
#   scripts/bench-proxy.sh --calls 500 --long 20000
#
# Extra arguments go to portcullis-proxy-bench (see its --help). The server-everything
# rows need scripts/setup-interop.sh; without .interop/ they are skipped.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
cargo build --release -p portcullis -p portcullis-testkit >&2
BENCH="$ROOT/target/release/portcullis-proxy-bench"
echo "# portcullis proxy benchmark ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "## audit durability: the default (group)"
echo
"$BENCH" "$@"
echo
echo "## audit --no-fsync"
echo
"$BENCH" --no-fsync --long 0 "$@"
if [[ -f models/all-MiniLM-L6-v2/model.safetensors ]]; then
  echo
  echo "## embedding stage on (audit durability: the default)"
  echo
  "$BENCH" --embedding --long 0 "$@"
fi
echo
echo "## floor: a bare byte relay in the gateway's place"
echo
"$BENCH" --floor bytes --long 0 "$@"
echo
echo "## floor: an rmcp pass-through in the gateway's place (no inspection, no log)"
echo
"$BENCH" --floor rmcp --long 0 "$@"
