#!/usr/bin/env bash
# The README's first command: install what hostagent needs, build it, show the embedded default host
# (a simulated Vela-2-like HGX H100 machine) as hostagent sees it, then run the daemon on it and
# drive it through its REST API with hostagentctl: libvirt's in-process test:/// driver stands in
# for QEMU, and the control plane's calls create the Vela 2 training VM (placed, its disk made as an
# overlay of a boot image, defined with its record, started), show it and the host's capacity, and
# delete it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh default
bin=./build/default/hostagent
$bin/hostagentctl topology --simulated vela2
work="$(mktemp -d "${TMPDIR:-/tmp}/hostagent-demo.XXXXXX")"
daemon=""
cleanup() {
  [[ -n "$daemon" ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# The VM's boot image: an empty 1 GiB raw disk (sparse), since a simulated host has no OS images.
# It lies in the embedded default's images.directories (STATE_DIR/images): a request's boot image
# may lie nowhere else.
mkdir -p "$work/state/images"
truncate -s 1G "$work/state/images/boot.raw"
socket="$work/hostagent.sock"
echo
echo "=== hostagentd --simulated vela2 (libvirt test:///default), API on unix:$socket"
$bin/hostagentd --simulated vela2 --state-dir "$work/state" --listen "unix:$socket" &
daemon=$!
for _ in $(seq 300); do
  [[ -S "$socket" ]] && break
  kill -0 "$daemon" || exit 1
  sleep 0.1
done
ctl() {
  echo
  echo "\$ hostagentctl $*"
  $bin/hostagentctl --socket "$socket" "$@"
}
ctl vm create --template gx3d-160x1792x8h100 --name train-0 --boot-image "$work/state/images/boot.raw" --request-id demo-1
ctl vm show train-0
ctl host capacity
ctl vm list
ctl vm delete train-0
ctl operation list
ctl status
