#!/usr/bin/env bash
# Installs every Debian 12 package that hostagent's build, tests and benchmarks need.
# Idempotent and non-interactive: safe to run on every CI start.
#
# The virtualization stack is chosen here (README, "Two stacks"), by HOSTAGENT_STACK:
#   current    (the default) bookworm-backports' QEMU 10, libvirt 11 and kernel 6.12: what GPU
#              hosts run now (Debian 13, RHEL 10). The suite's libvirtd, QEMU and emulated host.
#   debian12   Debian 12's own QEMU 7.2, libvirt 9.0 and kernel 6.1.
# A machine on the other stack is moved to this one (apt brings each package to its version).
# Debian 12's stack is proven beside the current one in scripts/package.sh's stock Debian 12 root.
set -euo pipefail

stack="${HOSTAGENT_STACK:-current}"
case "$stack" in
  current) release=bookworm-backports kernel_series=6.12 ;;
  debian12) release=bookworm kernel_series=6.1 ;;
  *)
    echo "install-deps.sh: HOSTAGENT_STACK must be current or debian12, not '$stack'" >&2
    exit 2
    ;;
esac
# The stack's packages, each from $release: libvirtd and QEMU of the lifecycle tests (TCG: CI
# machines have no KVM), the guest agent the tests copy into their guests, and the kernel the
# guests and the emulated host boot, with its source and headers for netdevsim (tests/kernel).
stack_packages=(
  libvirt-daemon libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-dev libvirt-clients libvirt0
  qemu-system-x86 qemu-utils qemu-guest-agent
  linux-image-amd64 linux-headers-amd64 "linux-source-$kernel_series"
)

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
  libxml2-dev
  libsystemd-dev
  libibverbs-dev
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
  # NVMe admin commands (the erase between tenants); json-c is what libnvme.pc requires
  libnvme-dev libjson-c-dev
  # tools the tests and benchmarks run
  bzip2 xz-utils python3 openssl
  # isoinfo, the second reader of the cloud-init seed (tests/cloudinit)
  genisoimage
  # the guests' initramfs: a static busybox; liblzma for the kernel's modules where they are .ko.xz
  busybox-static liblzma-dev
  # hostagentctl verify-guest boots the Vela templates' stand-ins with their own firmware (UEFI)
  ovmf
  # the real-kernel harness (tests/kernel): an emulated GPU host under QEMU with VFIO, SR-IOV and
  # soft-RoCE; netdevsim is built out of tree from the kernel's own source (the stack's)
  iproute2 kmod ibverbs-providers
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

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# A stack package is in place when it is installed in its stack's version: backports' carry
# "~bpo12" (Debian's backports version scheme).
on_stack() {
  installed "$1" || return 1
  local version
  version="$(dpkg-query -W -f='${Version}' "$1")"
  if [[ $stack == current ]]; then [[ $version == *bpo12* ]]; else [[ $version != *bpo* ]]; fi
}
missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
stack_missing=()
for p in "${stack_packages[@]}"; do
  on_stack "$p" || stack_missing+=("$p")
done
# netdevsim is built from linux-source against linux-headers for the kernel the harness boots: when
# any of the three is new, all three are installed together, so apt brings them to one version.
for p in "${stack_missing[@]}"; do
  if [[ $p == linux-* ]]; then
    stack_missing+=(linux-image-amd64 linux-headers-amd64 "linux-source-$kernel_series")
    readarray -t stack_missing < <(printf '%s\n' "${stack_missing[@]}" | sort -u)
    break
  fi
done
# The current stack's machine keeps Debian 12's own kernel too, with its headers and source: the
# host-life boots start the emulated host on it and reboot it into the stack's, as a host upgraded
# from 6.1 to 6.12 does (tests/kernel/kernel_boot.cpp, "boot host life"). Its packages are named by
# the kernel's ABI (linux-image-6.1.0-NN-amd64), which bookworm's linux-image-amd64 depends on.
has_debian12_kernel() {
  installed linux-source-6.1 || return 1
  local image
  for image in $(dpkg-query -W -f='${Package}\n' 'linux-image-6.1.*-amd64' 2>/dev/null); do
    installed "$image" && installed "${image/image/headers}" && return 0
  done
  return 1
}
debian12_kernel_packages() {
  local image
  image="$(apt-cache show linux-image-amd64 | awk '/^Version:/ {v = $2} /^Depends:/ && v !~ /bpo/ {print v, $2}' |
    sort -V | tail -1 | cut -d' ' -f2)"
  [[ -n $image ]] || {
    echo "install-deps.sh: bookworm's linux-image-amd64 is not in apt's index" >&2
    return 1
  }
  echo "$image ${image/image/headers} linux-source-6.1"
}
debian12_kernel=0
if [[ $stack == current ]] && ! has_debian12_kernel; then debian12_kernel=1; fi

if [[ ${#missing[@]} -eq 0 && ${#stack_missing[@]} -eq 0 && $debian12_kernel -eq 0 ]]; then
  echo "install-deps.sh: all ${#packages[@]} packages and the $stack stack's ${#stack_packages[@]} present"
  exit 0
fi
echo "install-deps.sh: installing ${missing[*]} ${stack_missing[*]} ($stack stack from $release)"
export DEBIAN_FRONTEND=noninteractive
if [[ $stack == current ]]; then
  # bookworm-backports: apt takes nothing from it unless asked (its priority is 100), so only the
  # stack's packages and what they depend on come from it.
  cat >/etc/apt/sources.list.d/hostagent-backports.sources <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
fi
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
if [[ ${#missing[@]} -gt 0 ]]; then
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [[ ${#stack_missing[@]} -gt 0 ]]; then
  # -t: the stack's release first, for each package and what it depends on; downgrades allowed, so
  # that a machine moves from the current stack back to Debian 12's.
  apt-get install -y -qq --no-install-recommends --allow-downgrades -t "$release" "${stack_missing[@]}"
fi
if [[ $debian12_kernel -eq 1 ]]; then
  read -ra older < <(debian12_kernel_packages)
  echo "install-deps.sh: Debian 12's kernel beside the current stack's: ${older[*]}"
  apt-get install -y -qq --no-install-recommends "${older[@]}"
fi
