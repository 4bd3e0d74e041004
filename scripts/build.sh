#!/usr/bin/env bash
# Configures and builds one CMake preset (default: "default"), all of it or the targets named.
# Usage: scripts/build.sh [PRESET [TARGET...]]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/caches.sh
preset="${1:-default}"
shift || true
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" ${1:+--target "$@"}
