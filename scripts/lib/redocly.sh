#!/usr/bin/env bash
# The pinned Redocly CLI that lints api/openapi.yaml under Redocly's recommended rules.
#   scripts/lib/redocly.sh install   npm ci of tests/api/openapi/redocly/ into the cache (network)
#   scripts/lib/redocly.sh lint FILE the lint, as the CTest test api_openapi_lint runs it
# The install lives outside the clone, keyed by the lock file, so a new clone of the same lock
# reuses it: $HOSTAGENT_CACHE_DIR/redocly/<sha256 of package-lock.json>. Without it, lint is a
# visible skip, or a failure when HOSTAGENT_REQUIRE_REDOCLY=1 (scripts/test.sh sets it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/lib/caches.sh"
spec="$root/tests/api/openapi/redocly"
key="$(sha256sum "$spec/package-lock.json" | cut -c1-16)"
prefix="$HOSTAGENT_CACHE_DIR/redocly/$key"
cli="$prefix/node_modules/.bin/redocly"

install() {
  [[ -x $cli ]] && return 0
  if ! command -v npm >/dev/null; then
    echo "redocly.sh: npm is missing: scripts/install-deps.sh installs it" >&2
    return 1
  fi
  # Into a scratch directory renamed into place: a run killed halfway leaves no half install.
  local scratch="$prefix.partial.$$"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  cp "$spec/package.json" "$spec/package-lock.json" "$scratch/"
  (cd "$scratch" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  rm -rf "$prefix"
  mv "$scratch" "$prefix"
  echo "redocly.sh: @redocly/cli $("$cli" --version) in $prefix"
}

lint() {
  if [[ ! -x $cli ]]; then
    if [[ ${HOSTAGENT_REQUIRE_REDOCLY:-0} == 1 ]]; then
      echo "redocly.sh: $cli is missing (HOSTAGENT_REQUIRE_REDOCLY=1): run scripts/lib/redocly.sh install" >&2
      return 1
    fi
    echo "SKIPPED: the pinned Redocly CLI is not installed: run scripts/lib/redocly.sh install"
    return 0
  fi
  # No redocly.yaml: the rules are Redocly's recommended set as it ships, nothing turned off. Nor
  # telemetry or update checks: a test reaches no network. Redocly exits 0 on warnings; clean here
  # means none of either, so the JSON report's problems decide, and only a document with problems is
  # linted again for a report a person reads. One problem is expected, at one place, for a reason
  # the rule cannot know: the console's success is a WebSocket's 101 (RFC 6455 4.2.2), and
  # operation-2xx-response counts only 2XX. Anything else, there or elsewhere, fails.
  export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
  if "$cli" lint --extends=recommended --format=json "$1" 2>/dev/null | python3 -c '
import json, sys
expected = {("operation-2xx-response", "#/paths/~1v1~1vms~1{name}~1console/get/responses")}
problems = json.load(sys.stdin)["problems"]
left = [p for p in problems
        if (p["ruleId"], p["location"][0]["pointer"] if p.get("location") else "") not in expected]
errors = sum(1 for p in left if p["severity"] == "error")
print("redocly.sh: %d errors, %d warnings (%d expected: the console WebSocket)" %
      (errors, len(left) - errors, len(problems) - len(left)))
sys.exit(1 if left else 0)'; then
    return 0
  fi
  "$cli" lint --extends=recommended --format=stylish "$1" || true
  return 1
}

case "${1:-}" in
  install) install ;;
  lint) lint "${2:?lint FILE}" ;;
  *)
    echo "usage: scripts/lib/redocly.sh install | lint FILE" >&2
    exit 2
    ;;
esac
