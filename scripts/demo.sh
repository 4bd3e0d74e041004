#!/usr/bin/env bash
# The README's first command: install what hostagent needs, build it, and show the topology of the
# embedded default host (a simulated Vela-2-like HGX H100 machine) as hostagent sees it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh default
./build/default/hostagent/hostagentctl topology --simulated vela2
