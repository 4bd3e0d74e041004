#!/usr/bin/env bash
# clang-format (as a check, never rewriting) and clang-tidy over the project's own sources, using
# the default preset's compile_commands.json. `scripts/lint.sh --fix` rewrites the formatting.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${sources[@]}"
  exit 0
fi
# doctest_discover_tests splits a test name at ';' into CTest entries that run nothing yet pass.
if git grep -nE 'TEST_CASE\("[^"]*;' -- 'tests/*.cpp'; then
  echo "lint: a TEST_CASE name above contains ';' (CTest would split it into empty tests)"
  exit 1
fi
clang-format --dry-run -Werror "${sources[@]}"
echo "clang-format: ${#sources[@]} files clean"
[[ -f build/default/compile_commands.json ]] || scripts/build.sh default
mapfile -t units < <(git ls-files '*.cpp')
run-clang-tidy -quiet -p build/default -j "$(nproc)" "${units[@]}" >/tmp/hostagent-clang-tidy.log 2>&1 || {
  grep -E "warning:|error:" /tmp/hostagent-clang-tidy.log | sort -u | head -50
  echo "clang-tidy: findings above (full log: /tmp/hostagent-clang-tidy.log)"
  exit 1
}
echo "clang-tidy: ${#units[@]} translation units clean"
