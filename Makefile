# The two commands of the README: `make demo` and `make test`.
CARGO ?= cargo
BIN := target/release/portcullis

.PHONY: demo test lint unit bench setup build

## Set up (toolchain check, build) and scan the embedded demo inputs.
demo: setup build
	@echo
	@echo "== portcullis scan --input demo/demo.jsonl --config demo/portcullis.toml --format pretty =="
	@$(BIN) scan --input demo/demo.jsonl --config demo/portcullis.toml --format pretty --exit-zero

setup:
	@scripts/setup.sh

build:
	$(CARGO) build --release --locked -p portcullis

## Everything CI checks: formatting, lints, all tests.
test: lint unit

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

unit:
	$(CARGO) test --workspace --locked

## criterion benchmarks of normalize+rules (not part of `make test`).
bench:
	$(CARGO) bench -p portcullis-detect --bench pipeline
