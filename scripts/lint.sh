#!/usr/bin/env bash
# clang-format (as a check, never rewriting), the test-name lint, and clang-tidy over the project's
# own units (scripts/lib/tidy_cache.py: a unit found clean before is skipped when nothing it reads
# has changed). Units are checked with the default tree's compile_commands.json, and those only the
# asan tree builds (the fuzz targets) with its. clang-tidy checks what ships and the fuzz targets,
# not the tests' and benchmarks' own sources: those are held by both compilers' warnings as errors
# and run under ASan and UBSan, and clang-tidy on them took 24 CPU-seconds a batch, 75 batches, more
# than a cold CI run had left (README, "Two trees").
#   scripts/lint.sh           both
#   scripts/lint.sh --format  clang-format and the test names only (seconds, no build needed)
#   scripts/lint.sh --tidy    clang-tidy only (builds the default tree if it has no compile database)
#   scripts/lint.sh --fix     rewrites the formatting
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/caches.sh
mode="${1:-all}"
# Tracked files and new ones git does not ignore: a file not yet added is checked before it is
# committed, not first in CI's clone.
mapfile -t sources < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp')

format() {
  # doctest_discover_tests splits a test name at ';' into CTest entries that run nothing yet pass.
  # grep -z reads each file as one record, so a name clang-format moved to the line after
  # TEST_CASE( is seen too.
  local tests=()
  for source in "${sources[@]}"; do [[ $source == tests/*.cpp ]] && tests+=("$source"); done
  if grep -lzP 'TEST_CASE\(\s*"[^"]*;' "${tests[@]}"; then
    echo "lint: a TEST_CASE name above contains ';' (CTest would split it into empty tests)"
    exit 1
  fi
  clang-format --dry-run -Werror "${sources[@]}"
  echo "clang-format: ${#sources[@]} files clean"
}

tidy() {
  [[ -f build/default/compile_commands.json ]] || scripts/build.sh default
  mapfile -t units < <(git ls-files --cached --others --exclude-standard '*.cpp' ':!:tests/' ':!:bench/')
  python3 scripts/lib/tidy_cache.py --source . --cache "$HOSTAGENT_CACHE_DIR/clang-tidy" \
    -p build/default -p build/asan -j "$(nproc)" --log /tmp/hostagent-clang-tidy.log "${units[@]}" || {
    echo "clang-tidy: findings above (full log: /tmp/hostagent-clang-tidy.log)"
    exit 1
  }
}

case "$mode" in
  --fix) clang-format -i "${sources[@]}" ;;
  --format) format ;;
  --tidy) tidy ;;
  all)
    format
    tidy
    ;;
  *)
    echo "usage: scripts/lint.sh [--format | --tidy | --fix]" >&2
    exit 2
    ;;
esac
