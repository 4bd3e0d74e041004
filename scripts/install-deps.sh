#!/usr/bin/env bash
# Installs every Debian 12 package that hostagent's build, tests and benchmarks need.
# Idempotent and non-interactive: safe to run on every CI start.
set -euo pipefail

packages=(
  # toolchain; ccache for both trees (scripts/lib/caches.sh), lld to link them (CMakeLists.txt)
  build-essential cmake ninja-build pkg-config git ccache lld
  clang clang-format clang-tidy
  # libraries named in DEVELOPERS.md
  libhwloc-dev hwloc
  libpci-dev pciutils pci.ids
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libssl-dev
  libyaml-cpp-dev
  libpugixml-dev
  libcli11-dev doctest-dev
  libvirt-dev libvirt-clients libxml2-dev
  libsystemd-dev
  libibverbs-dev
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
  # NVMe admin commands (the erase between tenants); json-c is what libnvme.pc requires
  libnvme-dev libjson-c-dev
  # tools the tests and benchmarks run
  bzip2 xz-utils python3 openssl
  # the real libvirtd and QEMU of the lifecycle tests (TCG: CI machines have no KVM), and the guest
  # they boot: Debian's kernel with a busybox initramfs the tests build
  libvirt-daemon libvirt-daemon-system libvirt-daemon-driver-qemu qemu-system-x86 qemu-utils
  busybox-static linux-image-amd64 liblzma-dev
  # the guest's QEMU guest agent (the tests copy it into the initramfs; on the host it never runs:
  # its unit binds to the guest's virtio port)
  qemu-guest-agent
  # hostagentctl verify-guest boots the Vela templates' stand-ins with their own firmware (UEFI)
  ovmf
  # the real-kernel harness (tests/kernel): an emulated GPU host under QEMU with VFIO, SR-IOV and
  # soft-RoCE; netdevsim is built out of tree from the kernel's own source against its headers
  linux-source-6.1 linux-headers-amd64 iproute2 kmod ibverbs-providers
  # what a host's storage stack would read of a tenant's disk (tests/kernel/e2e/test_host_life.cpp):
  # sfdisk's GPT, LVM and md, each run inside the emulated host
  fdisk lvm2 mdadm
  # the fleet tests' real OpenStack Placement (scripts/placement.sh runs it under uwsgi, on loopback)
  placement-api uwsgi-core uwsgi-plugin-python3
  # cloud-init NoCloud seeds (ISO 9660)
  libisofs-dev
  # the systemd tests: a notify socket, a private bus with a stand-in systemd1 (dbus-daemon)
  systemd dbus-daemon
  # scripts/package.sh: CPack's .deb (dpkg-shlibdeps) and .rpm (rpmbuild), lintian, a clean Debian
  # 12 root to install the .deb into, booted under systemd (systemd-nspawn) to run the units, and
  # logrotate to read and run the shipped /etc/logrotate.d/hostagent
  dpkg-dev rpm lintian debootstrap systemd-container logrotate
)
# The OpenAPI lint's Redocly CLI runs on Node.js (scripts/lib/redocly.sh installs it with npm). A
# machine with another vendor's nodejs (it carries its own npm, and conflicts with Debian's) keeps it.
if ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

if [[ ${EUID} -ne 0 ]]; then
  echo "install-deps.sh: run as root (it calls apt-get)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# netdevsim is built from linux-source against linux-headers for the kernel the harness boots: when
# either is new, install the kernel image with them, so apt brings all three to one version (an
# older image already installed would otherwise have no matching headers).
for p in "${missing[@]}"; do
  if [[ $p == linux-headers-amd64 || $p == linux-source-6.1 ]]; then
    missing+=(linux-image-amd64)
    break
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps.sh: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# placement-api's package starts its service at install (invoke-rc.d): the tests run their own on
# loopback, so a policy-rc.d refuses starts while apt runs (policy-rc.d(8), exit 101), unless the
# machine already has one of its own.
own_policy=""
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  own_policy=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' >"$own_policy"
  chmod 755 "$own_policy"
  trap 'rm -f "$own_policy"' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}"
