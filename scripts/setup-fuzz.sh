#!/usr/bin/env bash
# Install what `make fuzz` needs on a fresh machine, and nothing else. Idempotent.
#
# The fuzzer is libFuzzer, built from source by the `libfuzzer-sys` crate (pinned
# =0.4.13 in fuzz/Cargo.toml, every dependency pinned by fuzz/Cargo.lock) and
# linked into the fuzz binary; rustc's SanitizerCoverage options are stable, so
# the stable toolchain is enough (no cargo-fuzz, no nightly, no afl). Needed:
#   - the Rust toolchain of the main workspace (rustup, stable);
#   - a C++17 compiler for libFuzzer's sources (Debian: g++);
#   - the crates of fuzz/Cargo.lock (fetched here, so `make fuzz` can run offline).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
  echo "setup-fuzz: no cargo; install the Rust toolchain first (scripts/setup.sh)" >&2
  exit 1
fi

if ! command -v c++ >/dev/null && ! command -v g++ >/dev/null && ! command -v clang++ >/dev/null; then
  if command -v apt-get >/dev/null; then
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends g++
  else
    echo "setup-fuzz: install a C++17 compiler (g++ or clang++) for libFuzzer" >&2
    exit 1
  fi
fi

(cd fuzz && cargo fetch --locked)
echo "setup-fuzz: ready ($(c++ --version 2>/dev/null | head -1 || g++ --version | head -1); $(rustc --version))"
