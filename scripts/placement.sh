#!/usr/bin/env bash
# Starts or stops a real OpenStack Placement (Debian 12's placement-api 8.0.0, under uwsgi) on
# loopback, for the fleet tests and benchmarks, as scripts/libvirtd.sh does for libvirtd:
#   scripts/placement.sh start [PORT]   (default 18778; prints the URL)
#   scripts/placement.sh restart [PORT]   stops any running one first, so that the caller owns it (CI)
#   scripts/placement.sh stop | url
# Standalone: no Keystone (auth_strategy noauth2: the token "admin" is an administrator), SQLite in
# $HOSTAGENT_CACHE_DIR/placement. SQLite takes one writer at a time, so uwsgi runs one process with
# one thread: more give "database is locked" (docs/placement.md says how a real fleet runs it).
# Each start begins with an empty database, so no test sees what an earlier run left.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/caches.sh

dir="$HOSTAGENT_CACHE_DIR/placement"
pidfile="$dir/uwsgi.pid"
port_file="$dir/port"

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

url() { echo "http://127.0.0.1:$(cat "$port_file")"; }

port_answers() {
  python3 -c 'import socket, sys; s = socket.socket(); s.settimeout(2); sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"
}

write_config() {
  mkdir -p "$dir"
  cat >"$dir/placement.conf" <<EOF
[DEFAULT]
debug = False
[api]
auth_strategy = noauth2
[placement_database]
connection = sqlite:///$dir/placement.sqlite
[oslo_policy]
policy_file = $dir/policy.yaml
EOF
  : >"$dir/policy.yaml"
}

# The root URL answers without a token once the application has loaded (a few seconds: Placement
# syncs os-traits and os-resource-classes into the database at its first request).
wait_ready() {
  local target
  target="$(url)/"
  for _ in $(seq 300); do
    if python3 - "$target" <<'EOF' 2>/dev/null; then
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2).read()
EOF
      return 0
    fi
    running || { echo "placement.sh: uwsgi exited; see $dir/uwsgi.log" >&2; tail -20 "$dir/uwsgi.log" >&2; return 1; }
    sleep 0.2
  done
  echo "placement.sh: no answer at $target within 60 s; see $dir/uwsgi.log" >&2
  return 1
}

start() {
  local port="${1:-18778}"
  if running; then
    url
    return 0
  fi
  for tool in uwsgi placement-manage; do
    command -v "$tool" >/dev/null || { echo "placement.sh: $tool missing; run scripts/install-deps.sh" >&2; exit 1; }
  done
  # Another Placement on the port (another cache directory's, or one still going down) would answer
  # wait_ready below in this one's stead, and the tests would run against its database: seen once,
  # when two runs with different HOSTAGENT_CACHE_DIR followed each other. The port must be free.
  if port_answers "$port"; then
    echo "placement.sh: 127.0.0.1:$port is taken by a process this cache directory ($dir) did not start;" \
      "stop it (scripts/placement.sh stop with its HOSTAGENT_CACHE_DIR) or give another port" >&2
    exit 1
  fi
  write_config
  rm -f "$dir/placement.sqlite"
  # placement-manage reads --config-file, not OS_PLACEMENT_CONFIG_DIR (placement/cmd/manage.py).
  placement-manage --config-file "$dir/placement.conf" db sync >"$dir/db-sync.log" 2>&1 ||
    { cat "$dir/db-sync.log" >&2; exit 1; }
  echo "$port" >"$port_file"
  OS_PLACEMENT_CONFIG_DIR="$dir" uwsgi --plugin python3 --http-socket "127.0.0.1:$port" \
    --wsgi-file /usr/bin/placement-api --processes 1 --threads 1 --master --die-on-term \
    --add-header 'Connection: close' --buffer-size 65535 \
    --disable-logging --pidfile "$pidfile" --daemonize "$dir/uwsgi.log"
  wait_ready
  url
}

stop() {
  running || return 0
  local pid
  pid="$(cat "$pidfile")"
  kill "$pid"
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
}

case "${1:-}" in
  start) start "${2:-18778}" ;;
  restart)
    stop
    start "${2:-18778}"
    ;;
  stop) stop ;;
  url) running && url ;;
  *)
    echo "usage: scripts/placement.sh start|restart [PORT] | stop | url" >&2
    exit 2
    ;;
esac
