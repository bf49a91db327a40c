# The two commands of the README: `make demo` and `make test`; `make fuzz` (not
# part of `make test`) is described in docs/fuzzing.md.
CARGO ?= cargo
BIN := target/release/portcullis

.PHONY: demo test lint unit bench setup setup-demo build build-demo fuzz fuzz-setup model

## Check the toolchain, build what the demo runs, scan the demo inputs, then run the
## gateway in front of a benign and an attack server and show what the client gets.
## The demo's binary leaves out the heavy optional stages (embedding, LLM review; the
## balanced preset uses neither): `make build` builds the full one.
demo: setup-demo build-demo
	@echo
	@echo "== portcullis scan --input demo/demo.jsonl --config demo/portcullis.toml --format pretty =="
	@$(BIN) scan --input demo/demo.jsonl --config demo/portcullis.toml --format pretty --exit-zero
	@echo
	@echo "== portcullis proxy --config demo/gateway.toml  (client: portcullis-democlient) =="
	@rm -rf demo/out
	@target/release/portcullis-democlient --audit demo/out/audit.jsonl -- $(BIN) proxy --config demo/gateway.toml

setup:
	@scripts/setup.sh

setup-demo:
	@scripts/setup.sh --demo

build:
	$(CARGO) build --release --locked -p portcullis -p portcullis-testkit

build-demo:
	$(CARGO) build --release --locked -p portcullis -p portcullis-testkit --no-default-features

## Everything CI checks: formatting, lints, all tests (set-up first: the gateway's
## interop tests need the npm and PyPI pieces of scripts/setup-interop.sh).
test: setup lint unit

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

unit:
	$(CARGO) test --workspace --locked
	@echo "== the light binary of make demo (no embedding, no LLM review)"
	$(CARGO) test --locked -p portcullis --no-default-features --test features --test cli

## criterion benchmarks of normalize+rules (not part of `make test`).
bench:
	$(CARGO) bench -p portcullis-detect --bench pipeline

## Fuzz every target for FUZZ_SECONDS each (default 60), one at a time, under
## nice; prints targets, seconds, executions, exec/s, crashes, hangs and corpus
## sizes (docs/fuzzing.md). Stable toolchain, libFuzzer; not part of `make test`:
## CI replays the committed corpora instead (crates/portcullis-fuzz/tests/replay.rs).
FUZZ_SECONDS ?= 60
FUZZ_WORKERS ?= 1
fuzz: fuzz-setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_WORKERS=$(FUZZ_WORKERS) scripts/fuzz.sh $(FUZZ_TARGETS)

fuzz-setup:
	@scripts/setup-fuzz.sh

## Rebuild the detector's learned parts from their sources (not part of `make test`;
## docs/eval.md "The full corpus"): build the full corpus (the committed corpus's
## sources plus corpus/harvest and corpus/payloads), train the lexical model on its
## train split, embed it, calibrate the presets on its dev split, and pin its hash.
## The debug binary is enough (the detector is optimized in dev builds): 3 min 16 s on a 2-core machine after a debug build.
MODEL_BIN := target/debug/portcullis
FULL := target/corpus/full.jsonl
model:
	$(CARGO) build --locked -p portcullis
	@mkdir -p target/corpus
	$(MODEL_BIN) corpus build --harvest corpus/harvest --payloads corpus/payloads --out $(FULL)
	sha256sum $(FULL) | cut -d' ' -f1 > corpus/full.sha256
	$(MODEL_BIN) train-lexical --corpus $(FULL)
	$(CARGO) build --locked -p portcullis
	$(MODEL_BIN) calibrate --corpus $(FULL) --preset balanced --lexical --target-fpr 0.01 --target-referral 0.12 --target-flag-fpr 0.05 --out presets/balanced.toml
	$(MODEL_BIN) calibrate --corpus $(FULL) --preset strict --lexical --target-fpr 0.02 --target-referral 0.25 --out presets/strict.toml
	$(MODEL_BIN) calibrate --corpus $(FULL) --preset permissive --lexical --target-fpr 0.0025 --target-referral 0.05 --out presets/permissive.toml
	$(MODEL_BIN) calibrate --corpus $(FULL) --preset balanced --no-lexical --target-fpr 0.01 --target-referral 0.12 --target-flag-fpr 0.05 --out reports/rules-only-balanced.toml
