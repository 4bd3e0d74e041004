#!/usr/bin/env bash
# The README's first command: install what hostagent needs, build it, show the embedded default host
# (a simulated Vela-2-like HGX H100 machine) as hostagent sees it, then run the daemon on it: libvirt's
# in-process test:/// driver stands in for QEMU, and the daemon creates the Vela 2 training VM
# (placed, its disk made as an overlay of a boot image, defined with its record, started), shows it,
# lists the host's domains, and deletes it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh default
bin=./build/default/hostagent
$bin/hostagentctl topology --simulated vela2
work="$(mktemp -d "${TMPDIR:-/tmp}/hostagent-demo.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The VM's boot image: an empty 1 GiB raw disk (sparse), since a simulated host has no OS images.
truncate -s 1G "$work/boot.raw"
echo
echo "=== hostagentd --simulated vela2 (libvirt test:///default)"
$bin/hostagentd --simulated vela2 --state-dir "$work/state" \
  --exec "create train-0 gx3d-160x1792x8h100 boot_image=$work/boot.raw request_id=demo-1" \
  --exec "show train-0" --exec "list" --exec "delete train-0" --exec "status"
