#!/usr/bin/env bash
# The README's second command (and CI's): install, build, and run the whole suite twice: the
# default build, then the AddressSanitizer + UBSan build; then the fuzz targets for a fixed number of
# executions (a clang build of their own), then lint, then the packages (scripts/package.sh: the .deb
# and .rpm built, lintian, installed into a clean Debian 12 root and checked there).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ -z "${HOSTAGENT_REFERENCE_DATA:-}" && -d ../shared/data ]]; then
  HOSTAGENT_REFERENCE_DATA="$(cd ../shared/data && pwd)"
  export HOSTAGENT_REFERENCE_DATA
fi
echo "HOSTAGENT_REFERENCE_DATA=${HOSTAGENT_REFERENCE_DATA:-<unset: reference-data tests will be skipped>}"
# A real libvirtd with QEMU for the lifecycle tests. Here its absence is a failure, not a skip.
scripts/libvirtd.sh start
export HOSTAGENT_REQUIRE_LIBVIRTD=1
for preset in default asan; do
  echo "=== build: $preset"
  scripts/build.sh "$preset"
  echo "=== test: $preset"
  rm -f "build/$preset/verify-guest-times.txt"
  ctest --preset "$preset"
  # hostagentctl verify-guest, booted per shape: each time from start to power-off (tests/hostagent/verify).
  echo "=== verify-guest boots ($preset)"
  cat "build/$preset/verify-guest-times.txt" 2>/dev/null || echo "(none ran)"
done
echo "=== fuzz"
scripts/fuzz.sh 200000
echo "=== lint"
scripts/lint.sh
echo "=== package"
scripts/package.sh
