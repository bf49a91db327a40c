#!/usr/bin/env bash
# Embedding throughput, Portcullis vs sentence-transformers (PyTorch, CPU), same
# weights, same texts, 2 threads each, measured in one run. Not part of CI.
#
#   scripts/bench-embed.sh            (table on stdout; raw results in target/bench-embed/)
#
# Makes its own virtual environment (.venv-bench, git-ignored) with
# sentence-transformers and torch from PyPI on first use (a large download).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${BENCH_VENV:-.venv-bench}"
OUT=target/bench-embed
THREADS="${BENCH_THREADS:-2}"
mkdir -p "$OUT"

scripts/fetch-models.sh
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check sentence-transformers torch
fi
"$VENV/bin/python" scripts/bench-embed.py cases "$OUT/cases.json" models/all-MiniLM-L6-v2

cargo build --release --quiet -p portcullis-embed --example embed_bench
# Both sides get the same number of threads.
export RAYON_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"
echo "bench-embed: sentence-transformers…" >&2
"$VENV/bin/python" scripts/bench-embed.py st "$OUT/cases.json" models/all-MiniLM-L6-v2 > "$OUT/st.jsonl"
echo "bench-embed: portcullis, onnx backend…" >&2
target/release/examples/embed_bench "$OUT/cases.json" models/all-MiniLM-L6-v2 onnx > "$OUT/rust-onnx.jsonl"
echo "bench-embed: portcullis, candle backend…" >&2
target/release/examples/embed_bench "$OUT/cases.json" models/all-MiniLM-L6-v2 candle > "$OUT/rust-candle.jsonl"
"$VENV/bin/python" scripts/bench-embed.py table "$OUT/st.jsonl" "$OUT/rust-onnx.jsonl" "$OUT/rust-candle.jsonl"
echo
echo "($(nproc) cores; $THREADS threads each; $(uname -m); $(date -u +%Y-%m-%d))"
