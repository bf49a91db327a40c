#!/usr/bin/env bash
# Ship the fully int8 fine-tuned transformer as weights/injection-minilm-int8/ with a
# calibrated detector configuration (issue 23). Runs after run.sh and
#   OPS="MatMul Gather" NAME=int8-all int8.sh
# on the same OUT. Not a CI step: CI checks what this committed (SHA256SUMS, the
# configuration, the model's scores: crates/portcullis-detect/tests/shipped_transformer.rs).
#
# The cascade's settings were chosen on dev records only (`gate_sweep.py` on an
# ungated eval of the dev sample, docs/eval.md "The transformer configuration"):
#   channels   = tool_result, resource  (on definitions and prompts it added false
#                                        flags on dev and held a real server's prompt)
#   gate       = the 0.9 quantile of the lexical score of benign dev records (with the
#                egress guard's findings not opening it: 7.9% of benign dev records read);
#                detector-recall.toml: the 0.8 quantile (16.4% read, more recall)
#   max_chunks = 8                       (a 64 KiB result: ~115 ms instead of 1.2 s)
# It is calibrated, like the presets, on the dev split of the full corpus (20,508
# records: `portcullis corpus build --harvest corpus/harvest --payloads corpus/payloads
# --out target/corpus/full.jsonl`, SHA-256 in corpus/full.sha256), for block FPR <= 0.5%
# and flag FPR <= 1% on every channel with enough benign dev records (issue 23, item 5).
#
#   scripts/transformer/ship.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-target/transformer}"
PY="${PY:-python3}"
BIN="${BIN:-target/release/portcullis}"
SRC="$OUT/minilm-ft-int8-all"
W=weights/injection-minilm-int8
HERE=scripts/transformer
CORPUS="${CORPUS:-target/corpus/full.jsonl}"
[[ -x "$BIN" ]] || { echo "ship.sh: $BIN not found: cargo build --release --locked -p portcullis" >&2; exit 1; }
[[ -f "$SRC/model.onnx" && -f "$SRC/head-dev.json" ]] || { echo "ship.sh: run run.sh, then OPS=\"MatMul Gather\" NAME=int8-all int8.sh" >&2; exit 1; }
[[ -f "$CORPUS" && "$(sha256sum "$CORPUS" | cut -d' ' -f1)" == "$(cat corpus/full.sha256)" ]] ||
  { echo "ship.sh: $CORPUS is not the full corpus of corpus/full.sha256 (see the header)" >&2; exit 1; }
[[ -d "$OUT/eval-dev/records" ]] || { echo "ship.sh: $OUT/eval-dev/records missing (run.sh writes it)" >&2; exit 1; }
step() { echo "== $(date -u +%H:%M:%S) $*"; }

step "1. the model's files"
mkdir -p "$W"
cp "$SRC"/{model.onnx,tokenizer.json,config.json,sentence_bert_config.json,LICENSE,NOTICE} "$W/"
cp "$SRC/head-dev.json" "$W/head.json"
cp "$SRC/finetune.json" "$W/finetune.json"

step "2. the configurations, calibrated on the full corpus's dev records"
# detector.toml: the gate at the 0.9 quantile (issue 23's budget of 10% of benign items);
# detector-recall.toml: at the 0.8 quantile (more recall, about twice the model time).
for spec in "detector.toml 0.9" "detector-recall.toml 0.8"; do
  name="${spec% *}"; q="${spec#* }"
  GATE="$("$PY" "$HERE/gate.py" "$OUT"/eval-dev/records/*.jsonl --quantile "$q")"
  sed '/^\[embedding\]/,/^\[/{/^enabled\|^models_dir\|^chunk_tokens\|^k /d}' presets/balanced.toml |
    sed "s|^\[embedding\]|[embedding]\nenabled = true\nmodels_dir = \"$W\"\nhead = \"$W/head.json\"\nk = 0\nchunk_tokens = 126\ngate = $GATE\nmax_chunks = 8\nchannels = [\"tool_result\", \"resource\"]|" \
    > "$OUT/base-$name"
  "$BIN" calibrate --corpus "$CORPUS" --config "$OUT/base-$name" \
    --target-fpr 0.005 --target-referral 0.12 --target-flag-fpr 0.01 --out "$W/$name"
done

step "3. SHA256SUMS"
(cd "$W" && sha256sum model.onnx head.json tokenizer.json config.json sentence_bert_config.json \
  LICENSE NOTICE finetune.json detector.toml detector-recall.toml > SHA256SUMS)
cat "$W/SHA256SUMS"
step "done: $W"
