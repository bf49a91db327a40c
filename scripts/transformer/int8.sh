#!/usr/bin/env bash
# Does int8 hold accuracy? After run.sh: quantize the fine-tuned graph (quantize.py),
# fit the head's Platt scaling on its own embeddings of the same dev records,
# calibrate the ungated configuration on them, and evaluate it beside the fp32
# configuration's records of run.sh (same test and rules_blind records).
#
#   PY=/tmp/ftvenv/bin/python scripts/transformer/int8.sh [OUT]    (PY also needs onnxruntime==1.22.1)
#   OPS="MatMul Gather" NAME=int8-all ...int8.sh [OUT]    (the word-embedding table too)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-target/transformer}"
PY="${PY:-python3}"
BIN="${BIN:-target/debug/portcullis}"
[[ -f "$OUT/ft.toml" && -d "$OUT/eval/records" ]] || { echo "int8.sh: run run.sh first" >&2; exit 1; }
OPS="${OPS:-MatMul}"
NAME="${NAME:-int8}"
step() { echo "== $(date -u +%H:%M:%S) $*"; }
step "1. quantize"
# shellcheck disable=SC2086  # OPS is a list
"$PY" scripts/transformer/quantize.py "$OUT/minilm-ft" "$OUT/minilm-ft-$NAME" $OPS
step "2. Platt scaling on the int8 embeddings of the dev records"
"$BIN" train-embedding --corpus "$OUT/sample.jsonl" --models-dir "$OUT/minilm-ft-$NAME" \
  --head-from "$OUT/minilm-ft/head.json" --out "$OUT/minilm-ft-$NAME/head-dev.json"
step "3. calibrate and evaluate"
sed "s|$OUT/minilm-ft\"|$OUT/minilm-ft-$NAME\"|; s|$OUT/minilm-ft/head-dev.json|$OUT/minilm-ft-$NAME/head-dev.json|" \
  "$OUT/base-ft.toml" > "$OUT/base-ft-$NAME.toml"
grep -q minilm-ft-$NAME "$OUT/base-ft-$NAME.toml"
"$BIN" calibrate --corpus "$OUT/sample.jsonl" --config "$OUT/base-ft-$NAME.toml" \
  --target-fpr 0.01 --target-referral 0.12 --target-flag-fpr 0.05 --out "$OUT/ft-$NAME.toml"
"$BIN" eval --corpus "$OUT/sample.jsonl" --runs 2 --no-progress --out "$OUT/eval-$NAME-only" \
  --name "transformer-$NAME" --config "$OUT/ft-$NAME.toml" > /dev/null
# One report of both, paired on the same records.
RECORDS=("$OUT/eval/records/transformer.jsonl" "$OUT"/eval-$NAME-only/records/*.jsonl)
"$BIN" eval report "${RECORDS[@]}" --out "$OUT/eval-$NAME" > /dev/null
"$PY" scripts/transformer/recall_at_fpr.py "${RECORDS[@]}" > "$OUT/$NAME-recall_at_fpr.md"
"$PY" scripts/transformer/cascade_share.py "${RECORDS[@]}" > "$OUT/$NAME-cascade_share.md"
cat "$OUT/$NAME-recall_at_fpr.md" "$OUT/$NAME-cascade_share.md"
step "done: $OUT/eval-$NAME/report.md"
