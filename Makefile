# The two commands of the README: `make demo` and `make test`.
CARGO ?= cargo
BIN := target/release/portcullis

.PHONY: demo test lint unit bench setup build

## Set up (toolchain, interop pieces), build, scan the demo inputs, then run the
## gateway in front of a benign and an attack server and show what the client gets.
demo: setup build
	@echo
	@echo "== portcullis scan --input demo/demo.jsonl --config demo/portcullis.toml --format pretty =="
	@$(BIN) scan --input demo/demo.jsonl --config demo/portcullis.toml --format pretty --exit-zero
	@echo
	@echo "== portcullis proxy --config demo/gateway.toml  (client: portcullis-democlient) =="
	@rm -rf demo/out
	@target/release/portcullis-democlient --audit demo/out/audit.jsonl -- $(BIN) proxy --config demo/gateway.toml

setup:
	@scripts/setup.sh

build:
	$(CARGO) build --release --locked -p portcullis -p portcullis-testkit

## Everything CI checks: formatting, lints, all tests (set-up first: the gateway's
## interop tests need the npm and PyPI pieces of scripts/setup-interop.sh).
test: setup lint unit

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

unit:
	$(CARGO) test --workspace --locked

## criterion benchmarks of normalize+rules (not part of `make test`).
bench:
	$(CARGO) bench -p portcullis-detect --bench pipeline
