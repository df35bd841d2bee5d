#!/usr/bin/env bash
# Run every fuzz target for SECONDS each (default 30) with cargo-fuzz on nightly, then print a
# table: target, executions, crashes. libFuzzer stops a target at its first crash, so crashes
# is 0 or 1 per target; fix it and run again. Crash inputs land in fuzz/artifacts/TARGET/ (reproduce
# one with `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-…`); each target's
# libFuzzer log is kept in fuzz/artifacts/TARGET/fuzz-all.log.
#
#   scripts/fuzz-all.sh [SECONDS]
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). All targets are
# built first, in one cargo invocation, so the time given is fuzzing time. Exit status 1 if
# any target crashed (a panic, an assertion of the target, a sanitizer report, a timeout or
# out of memory), else 0.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

secs=${1:-30}
case $secs in '' | *[!0-9]*)
  echo "usage: $0 [SECONDS]" >&2
  exit 2
  ;;
esac

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz-all: the nightly toolchain is missing: rustup toolchain install nightly" >&2
  exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz-all: cargo-fuzz is missing: cargo install cargo-fuzz" >&2
  exit 2
fi

mapfile -t targets < <(cargo +nightly fuzz list)
cargo +nightly fuzz build

# Seed each corpus with the test fixtures of its format (small ones only: libFuzzer's
# input length limit grows to the largest seed), so structured formats start from valid
# documents rather than from nothing. perf_stat and region_files read a first byte of their
# own (platform pick, file kind) before the text; perf_stat gets a 0 (the first platform).
seed() {
  local t=$1 prefix=$2
  shift 2
  mkdir -p "corpus/$t"
  local f
  for f in "$@"; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 16384 ] || continue
    { printf '%b' "$prefix"; cat "$f"; } >"corpus/$t/seed-$(basename "$f")"
  done
}
fx=../tests/fixtures
seed ceilings_json '' "$fx"/reports/ceilings.json
seed cpuid_dump '' "$fx"/cpuid/*.txt
seed gate_rules '' "$fx"/gate/*.toml
seed ncu_csv '' "$fx"/ncu/*.csv
seed perf_stat '\x00' "$fx"/perf-stat/*.csv
seed report_json '' "$fx"/reports/*.json "$fx"/gate/*.json

rows=()
failed=0
for t in "${targets[@]}"; do
  mkdir -p "artifacts/$t"
  log=artifacts/$t/fuzz-all.log
  before=$(find "artifacts/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  echo "fuzz-all: $t for ${secs} s" >&2
  # libFuzzer stops at the first crash too, and exits non-zero then. -print_funcs=0: naming
  # each newly covered function symbolizes it from the debug info, which held trace_elf to
  # 14 executions a second (1,600 without).
  rc=0
  cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -print_funcs=0 -print_final_stats=1 >"$log" 2>&1 || rc=$?
  after=$(find "artifacts/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  crashes=$((after - before))
  # A failure that wrote no artifact (a build or libFuzzer error) still counts as one.
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
  # libFuzzer's final stats, printed at the end and on a crash alike.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rows+=("$t ${execs:-0} $crashes")
  if [ "$crashes" -ne 0 ]; then
    failed=1
    echo "fuzz-all: $t failed (exit $rc); see fuzz/$log" >&2
  fi
done

printf '\n%-18s %12s %8s\n' target executions crashes
for r in "${rows[@]}"; do
  # shellcheck disable=SC2086
  printf '%-18s %12s %8s\n' $r
done
printf '(%s s each)\n' "$secs"
exit "$failed"
