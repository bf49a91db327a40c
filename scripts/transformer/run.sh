#!/usr/bin/env bash
# The fine-tuned transformer experiment of issue 23, end to end (README.md here):
# the full corpus with the brief-4 payloads, a seeded sample, fine-tuning, ONNX
# export, Platt scaling on dev, the three configurations calibrated on the same dev
# records, and one `portcullis eval` of all three on the test and rules_blind
# records, then the per-channel and cascade tables. Not a CI step: 33 minutes
# here on 2 cores (fine-tuning 15, calibrations 8, the three configurations' eval 10).
#
#   PY=/path/to/venv/bin/python scripts/transformer/run.sh [OUT]
#
# PY needs torch, transformers, safetensors, tokenizers, numpy and onnx==1.23.2
# (README.md here). The portcullis binary must be built with its default features
# (`cargo build --locked -p portcullis`; the detector is optimized in dev builds) and
# `scripts/fetch-models.sh` must have fetched the base model and ONNX Runtime.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-target/transformer}"
PY="${PY:-python3}"
BIN="${BIN:-target/debug/portcullis}"
SEED=20261204
HERE=scripts/transformer
[[ -x "$BIN" ]] || { echo "run.sh: $BIN not found: cargo build --locked -p portcullis" >&2; exit 1; }
[[ -f models/all-MiniLM-L6-v2/model.safetensors ]] || { echo "run.sh: run scripts/fetch-models.sh first" >&2; exit 1; }
"$PY" -c 'import torch, transformers, safetensors, tokenizers, onnx' || {
  echo "run.sh: $PY lacks torch/transformers/safetensors/tokenizers/onnx (README.md here)" >&2; exit 1; }
mkdir -p "$OUT"
step() { echo "== $(date -u +%H:%M:%S) $*"; }

step "1. the full corpus with corpus/payloads-next (nothing committed is changed)"
rm -rf "$OUT/payloads" && mkdir -p "$OUT/payloads"
cp corpus/payloads/*.jsonl corpus/payloads-next/p4_*.jsonl "$OUT/payloads/"
"$BIN" corpus build --harvest corpus/harvest --payloads "$OUT/payloads" --out "$OUT/full-next.jsonl"

step "2. a seeded sample: 3,000 dev, 3,000 test, every rules_blind record"
"$PY" "$HERE/sample.py" "$OUT/full-next.jsonl" "$OUT/sample.jsonl" --seed "$SEED"

step "3. fine-tune on the train split (7,000 windows per class)"
"$PY" "$HERE/finetune.py" --corpus "$OUT/full-next.jsonl" --per-class 7000 --seed "$SEED" \
  --payloads corpus/payloads corpus/payloads-next --out "$OUT/minilm-ft"

step "4. export to ONNX (the exporter fetch-models.sh uses for the base model)"
"$PY" scripts/export-onnx.py "$OUT/minilm-ft" "$OUT/minilm-ft/model.onnx"

step "5. keep the fine-tuned head, fit its Platt scaling on the sample's dev records"
"$BIN" train-embedding --corpus "$OUT/sample.jsonl" --models-dir "$OUT/minilm-ft" \
  --head-from "$OUT/minilm-ft/head.json" --out "$OUT/minilm-ft/head-dev.json"

step "6. configurations, each calibrated on the same dev records with the balanced targets"
TARGETS=(--target-fpr 0.01 --target-referral 0.12 --target-flag-fpr 0.05)
# What the gate is read off: the cheap stages' scores on benign dev records.
"$BIN" calibrate --corpus "$OUT/sample.jsonl" --config presets/balanced.toml "${TARGETS[@]}" \
  --out "$OUT/rules-lexical.toml"
"$BIN" eval --corpus "$OUT/sample.jsonl" --split dev --runs 2 --no-progress \
  --config "$OUT/rules-lexical.toml" --name rules-lexical --out "$OUT/eval-dev" > /dev/null
GATE="$("$PY" "$HERE/gate.py" "$OUT"/eval-dev/records/*.jsonl --quantile 0.8)"
echo "gate = $GATE (the 0.8 quantile of the lexical score of benign dev records)"
embedding() {  # embedding() GATE: the balanced preset with the fine-tuned stage
  sed '/^\[embedding\]/,/^\[/{/^enabled\|^models_dir\|^chunk_tokens\|^k /d}' presets/balanced.toml |
    sed "s|^\[embedding\]|[embedding]\nenabled = true\nmodels_dir = \"$OUT/minilm-ft\"\nhead = \"$OUT/minilm-ft/head-dev.json\"\nk = 0\nchunk_tokens = 126\ngate = $1|"
}
embedding 0 > "$OUT/base-ft.toml"
embedding "$GATE" > "$OUT/base-ft-gated.toml"
"$BIN" calibrate --corpus "$OUT/sample.jsonl" --config "$OUT/base-ft.toml" "${TARGETS[@]}" --out "$OUT/ft.toml"
"$BIN" calibrate --corpus "$OUT/sample.jsonl" --config "$OUT/base-ft-gated.toml" "${TARGETS[@]}" --out "$OUT/ft-gated.toml"

step "7. eval: the three configurations on the sample's test and rules_blind records"
"$BIN" eval --corpus "$OUT/sample.jsonl" --runs 2 --no-progress --out "$OUT/eval" \
  --ablation "rules+lexical=@$OUT/rules-lexical.toml" \
  --ablation "transformer=@$OUT/ft.toml" \
  --ablation "transformer-gated=@$OUT/ft-gated.toml" > /dev/null

step "8. tables"
"$PY" "$HERE/recall_at_fpr.py" "$OUT"/eval/records/*.jsonl > "$OUT/recall_at_fpr.md"
"$PY" "$HERE/cascade_share.py" "$OUT"/eval/records/*.jsonl > "$OUT/cascade_share.md"
cat "$OUT/recall_at_fpr.md" "$OUT/cascade_share.md"
step "done: $OUT/eval/report.md"
