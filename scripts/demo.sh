#!/usr/bin/env bash
# The README's first command: install what hostagent needs, build it, show the embedded default host
# (a simulated Vela-2-like HGX H100 machine) as hostagent sees it, and render the Vela 2 training VM
# for it: placement, libvirt domain and the guest's NCCL topology.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh default
ctl=./build/default/hostagent/hostagentctl
$ctl topology --simulated vela2
out="${TMPDIR:-/tmp}/hostagent-demo"
echo
echo "=== hostagentctl render --template gx3d-160x1792x8h100 --simulated vela2"
$ctl render --template gx3d-160x1792x8h100 --simulated vela2 --name train-0 \
  --housekeeping-cpus 0-7,48-55,96-103,144-151 --output-dir "$out"
grep -E "<vcpu |<topology |pxb-pcie|<memnode |x-nv-gpudirect-clique" "$out/domain.xml" | sort | uniq -c | sort -rn
