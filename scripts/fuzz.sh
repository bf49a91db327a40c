#!/usr/bin/env bash
# Build the libFuzzer binary on the stable toolchain and run every fuzz target
# for a bounded time, one after the other, then print one table. See docs/fuzzing.md.
#
#   scripts/fuzz.sh [TARGET...]           FUZZ_SECONDS per target (default 60);
#                                         FUZZ_RUNS=N also stops a target after N
#                                         executions (whichever comes first);
#                                         FUZZ_WORKERS=K runs K processes on the
#                                         same corpus (each N/K runs; libFuzzer
#                                         reloads what the others add), one core each
#   scripts/fuzz.sh --seed [TARGET...]    merge fuzz/seeds/<t> (scripts/fuzz-seeds.py)
#                                         into the corpora, no fuzzing
#
# Each run grows fuzz/corpus/<t>, which is then minimized in place (libFuzzer
# -merge=1: the smallest set of inputs with the same coverage). A crash or a hang
# leaves its input in fuzz/artifacts/<t>/ and stops that target's run; the table
# counts them. Runs under `nice -n 19`, one process at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER=${FUZZ_SECONDS:-60}
WORKERS=${FUZZ_WORKERS:-1}
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || { echo "FUZZ_WORKERS=$WORKERS: expected a positive number" >&2; exit 2; }
RUNS=()
if [[ -n ${FUZZ_RUNS:-} ]]; then RUNS=(-runs="$(( (FUZZ_RUNS + WORKERS - 1) / WORKERS ))"); fi
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
FUZZ_TARGET_DIR=${FUZZ_TARGET_DIR:-$ROOT/fuzz/target}
BIN=$FUZZ_TARGET_DIR/$TRIPLE/release/portcullis-fuzz

SEED=0
if [[ ${1:-} == --seed ]]; then SEED=1; shift; fi
ALL=$(sed -n '/^targets!\[/,/^\]/s/^ *\([a-z_0-9]*\),$/\1/p' crates/portcullis-fuzz/src/lib.rs)
TARGETS=${*:-$ALL}

# SanitizerCoverage for libFuzzer: all stable rustc codegen options (cargo-fuzz
# passes the same ones, plus -Zsanitizer, which is what needs nightly). With an
# explicit --target they do not reach build scripts and proc macros.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares"
echo "== building the fuzz binary ($TRIPLE, release, debug assertions on)" >&2
(cd fuzz && CARGO_TARGET_DIR=$FUZZ_TARGET_DIR nice -n 19 cargo build --release --locked --target "$TRIPLE" >&2)

count() { find "$1" -maxdepth 1 -type f 2>/dev/null | wc -l; }
size() { du -sk "$1" 2>/dev/null | cut -f1; }

# Minimize fuzz/corpus/$1 in place, adding the inputs of $2.. (libFuzzer merge).
minimize() {
  local t=$1; shift
  local tmp; tmp=$(mktemp -d)
  PORTCULLIS_FUZZ_TARGET=$t nice -n 19 "$BIN" -merge=1 -timeout=10 -rss_limit_mb=2048 \
    "$tmp" "fuzz/corpus/$t" "$@" >"fuzz/artifacts/$t/merge.log" 2>&1 || {
      echo "merge of $t failed, see fuzz/artifacts/$t/merge.log" >&2; rm -rf "$tmp"; return 1; }
  rm -rf "fuzz/corpus/$t"; mv "$tmp" "fuzz/corpus/$t"; chmod 755 "fuzz/corpus/$t"
}

rows=()
for t in $TARGETS; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  if (( SEED )); then
    minimize "$t" "fuzz/seeds/$t"
    echo "$t: $(count fuzz/corpus/$t) inputs, $(size fuzz/corpus/$t) KiB" >&2
    continue
  fi
  log=fuzz/artifacts/$t/fuzz.log
  before=$(find "fuzz/artifacts/$t" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'oom-*' | wc -l)
  hang_before=$(find "fuzz/artifacts/$t" -maxdepth 1 -name 'timeout-*' | wc -l)
  echo "== $t: $SECONDS_PER s" >&2
  start=$(date +%s.%N)
  rm -f fuzz/artifacts/$t/fuzz-*.log
  set +e
  pids=()
  for (( w = 0; w < WORKERS; w++ )); do
    wlog=$log; (( WORKERS > 1 )) && wlog=fuzz/artifacts/$t/fuzz-$w.log
    PORTCULLIS_FUZZ_TARGET=$t nice -n 19 "$BIN" "fuzz/corpus/$t" \
      -max_total_time="$SECONDS_PER" "${RUNS[@]}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="fuzz/artifacts/$t/" >"$wlog" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  set -e
  end=$(date +%s.%N)
  if (( WORKERS > 1 )); then cat fuzz/artifacts/$t/fuzz-*.log >"$log"; fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{n += $1} END {print n + 0}')
  crashes=$(( $(find "fuzz/artifacts/$t" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'oom-*' | wc -l) - before ))
  hangs=$(( $(find "fuzz/artifacts/$t" -maxdepth 1 -name 'timeout-*' | wc -l) - hang_before ))
  if (( rc != 0 && crashes == 0 && hangs == 0 )); then
    echo "$t: the fuzzer exited with $rc and left no input; see $log" >&2; crashes=-1
  fi
  minimize "$t"
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.0f", b-a}')
  rate=$(awk -v n="$execs" -v s="$secs" 'BEGIN{printf "%.0f", (s>0? n/s : 0)}')
  rows+=("$(printf '| %-16s | %7s | %12s | %8s | %7s | %5s | %6s inputs, %5s KiB |' \
    "$t" "$secs" "$execs" "$rate" "$crashes" "$hangs" "$(count fuzz/corpus/$t)" "$(size fuzz/corpus/$t)")")
done

if (( ! SEED )); then
  echo
  echo "| target           | seconds |   executions |   exec/s | crashes | hangs | corpus (minimized)          |"
  echo "|------------------|---------|--------------|----------|---------|-------|-----------------------------|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "crash and hang inputs, if any: fuzz/artifacts/<target>/ (logs: fuzz.log)"
fi
