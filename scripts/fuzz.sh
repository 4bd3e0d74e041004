#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/) of the asan tree (clang, ASan+UBSan: cmake --preset asan; built
# here if they are not) for a fixed number of executions or seconds each, over a scratch copy of its
# seed corpus (fuzz/corpus/TARGET, never changed). Fails on a crash, a sanitizer report, a leak or
# an input slower than the timeout; the input that did it is kept in build/asan/fuzz-artifacts/
# (replay: build/asan/fuzz/TARGET FILE).
# Usage: scripts/fuzz.sh [RUNS]          executions per target (default 200000)
#        scripts/fuzz.sh --seconds N     N seconds per target, however many executions that is (CI:
#                                        the targets differ a hundredfold in speed, a time bounds them all)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/caches.sh
limit=(-runs=200000)
case "${1:-}" in
  "") ;;
  --seconds) limit=(-max_total_time="${2:?scripts/fuzz.sh --seconds N}") ;;
  *[!0-9]*)
    echo "usage: scripts/fuzz.sh [RUNS | --seconds N]" >&2
    exit 2
    ;;
  *) limit=(-runs="$1") ;;
esac
targets=(fuzz_http_request fuzz_json_body fuzz_template fuzz_config fuzz_placement_answers fuzz_sysfs_parsers)
# -max_len: above the fuzz limits the targets set (2 KiB of headers, 4 KiB of body), so both are hit;
# for the readers, enough for a whole template or configuration, an answer of a few providers, and
# a proc file of a few dozen lines.
declare -A max_len=([fuzz_http_request]=8192 [fuzz_json_body]=4096 [fuzz_template]=4096 [fuzz_config]=4096
  [fuzz_placement_answers]=4096 [fuzz_sysfs_parsers]=2048)
tree=build/asan
artifacts="$tree/fuzz-artifacts"

cmake --preset asan >/dev/null
cmake --build --preset asan -j "$(nproc)" --target "${targets[@]}"

scratch="$(mktemp -d /tmp/hostagent-fuzz-XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# One target's run: its log in $scratch/TARGET.log, its exit status and milliseconds in .status.
fuzz_one() {
  local target="$1" start status=0
  cp -r "fuzz/corpus/$target" "$scratch/$target"
  start=$(date +%s%N)
  "$tree/fuzz/$target" "${limit[@]}" -max_len="${max_len[$target]}" -timeout=10 -rss_limit_mb=2048 \
    -dict="fuzz/dict/$target.dict" -artifact_prefix="$artifacts/$target-" -print_final_stats=1 \
    "$scratch/$target" >"$scratch/$target.log" 2>&1 || status=$?
  echo "$status $((($(date +%s%N) - start) / 1000000))" >"$scratch/$target.status"
}

# Two at a time, each one process on one core: the machine has two.
running=0
for target in "${targets[@]}"; do
  fuzz_one "$target" &
  if (( ++running % 2 == 0 )); then wait; fi
done
wait
failed=0
for target in "${targets[@]}"; do
  if [[ ! -f "$scratch/$target.status" ]]; then
    echo "fuzz: $target did not run (setting up its scratch corpus failed)"
    failed=1
    continue
  fi
  read -r status ms <"$scratch/$target.status"
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$target.log")
  if [[ $status -ne 0 ]]; then
    tail -n 60 "$scratch/$target.log"
    echo "fuzz: $target FAILED (exit $status) after ${executed:-?} executions; the input is in $artifacts/"
    failed=1
    continue
  fi
  printf 'fuzz: %s: %s executions in %d.%03d s, corpus %s -> %s inputs\n' "$target" "$executed" $((ms / 1000)) $((ms % 1000)) \
    "$(find "fuzz/corpus/$target" -type f | wc -l)" "$(find "$scratch/$target" -type f | wc -l)"
done
exit "$failed"
