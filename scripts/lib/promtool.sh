#!/usr/bin/env bash
# Prometheus's promtool, to check what /v1/metrics answers (`promtool check metrics`: the text
# format, names, help, types, units, counters' _total).
#   scripts/lib/promtool.sh install   the promtool binary of Debian 12's prometheus package, into
#                                     the cache (network: apt-get download; the package is not
#                                     installed, so no Prometheus server starts)
#   scripts/lib/promtool.sh path      where it is (the CTest suite that runs it asks)
# It lives outside the clone, keyed by the package's version: $HOSTAGENT_CACHE_DIR/promtool/VERSION.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/lib/caches.sh"
cache="$HOSTAGENT_CACHE_DIR/promtool"

version() { apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2; exit}'; }

install() {
  local v
  v="$(version)"
  if [[ -z $v || $v == "(none)" ]]; then
    echo "promtool.sh: apt knows no prometheus package (run apt-get update)" >&2
    return 1
  fi
  [[ -x $cache/$v/promtool ]] && return 0
  # Into a scratch directory renamed into place: a run killed halfway leaves no half install.
  local scratch="$cache/$v.partial.$$"
  rm -rf "$scratch"
  mkdir -p "$scratch/deb"
  (cd "$scratch/deb" && apt-get download -q -o APT::Sandbox::User=root "prometheus=$v" >/dev/null)
  dpkg-deb -x "$scratch"/deb/prometheus_*.deb "$scratch/root"
  mv "$scratch/root/usr/bin/promtool" "$scratch/promtool"
  rm -rf "$scratch/deb" "$scratch/root" "${cache:?}/$v"
  mv "$scratch" "$cache/$v"
  echo "promtool.sh: $("$cache/$v/promtool" --version 2>&1 | head -1) in $cache/$v"
}

path() {
  local v
  v="$(version)"
  [[ -n $v && -x $cache/$v/promtool ]] && echo "$cache/$v/promtool"
}

case "${1:-}" in
  install) install ;;
  path) path ;;
  *)
    echo "usage: scripts/lib/promtool.sh install | path" >&2
    exit 2
    ;;
esac
