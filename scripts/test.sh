#!/usr/bin/env bash
# The README's second command (and CI's): installs what the suite needs, then runs all of it, the
# fast checks first so that a slip fails in a minute:
#   format       clang-format and the test-name lint (scripts/lint.sh --format)
#   build        the default tree: gcc, -O2 with Debian's hardening; the packages are made from it
#                (what its pass and the packages use: the default_pass target)
#   tidy start   clang-tidy (scripts/lint.sh --tidy) to the background, at the lowest priority
#   test         the default tree's CTest suite (tree:default): the kernel harness's boots, verify-guest's,
#                the fleet test
#   build asan   the asan tree: clang with ASan and UBSan over the whole tree, the fuzz targets too
#   test asan    its CTest suite: every other suite, the units and the daemon against the real libvirtd
#                (CMakePresets.json: ASan's quarantine of freed memory at 16 MiB, not its 256: a suite
#                process then reuses what it freed instead of faulting in fresh pages; measured on three
#                suites, 6.1 million page faults became 2.5 million and the CPU time fell 10 to 25 %.
#                And the asan tree's programs linked -no-pie, from the same -fPIE objects: ASan's
#                metadata made daemon_tests a PIE with 2.7 million relative relocations, which the
#                loader applied at each of its 104 starts, 0.35 s before main against 0.19 s)
#   fuzz         the libFuzzer targets of the asan tree, 20 seconds each, two at a time
#   package      the .deb and .rpm from the default tree's tested binaries, checked in a Debian 12 root
#   clang-tidy   waits for it: every unit, a clean verdict cached by what clang-tidy reads
# Every test runs once, in one tree's pass (ONCE_IN in tests/CMakeLists.txt, CMakePresets.json).
# Caches that outlive the clone (compiler, clang-tidy, the package root, netdevsim) live in
# /var/cache/hostagent (scripts/lib/caches.sh). Every run ends with each phase's seconds.
#
#   scripts/test.sh           everything, as above
#   scripts/test.sh --unit    the default tree's unit tier only (no libvirtd, no QEMU): the inner loop
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/caches.sh

mode=all
case "${1:-}" in
  "") ;;
  --unit) mode=unit ;;
  *)
    echo "usage: scripts/test.sh [--unit]" >&2
    exit 2
    ;;
esac

summary=()
current=""
run_start=$(date +%s%N)
seconds_since() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf '%d.%01d' $((ms / 1000)) $((ms % 1000 / 100)); }
print_summary() {
  local status=$?
  [[ -n $current ]] && summary+=("$(printf '%-12s %8s %5s  FAILED' "$current" "$(seconds_since "$phase_start")" "")")
  echo "=== phases (seconds; the share of the machine's CPUs kept busy)"
  printf '%s\n' "${summary[@]}"
  printf '%-12s %8s %5s  %s\n' total "$(seconds_since "$run_start")" "" "$([[ $status -eq 0 ]] && echo passed || echo FAILED)"
}
# clang-tidy reads only the sources and the two trees' compile databases, so it runs from the
# default build on, beside the rest, at the lowest priority: on what the test passes leave idle (the
# default tree's keeps the CPUs about 60% busy) and beside the package phase. Its own process group,
# so that a run that stops early stops it too; the clang-tidy phase at the end waits for it.
tidy_pid=""
start_tidy() {
  cmake --preset asan >/dev/null  # the fuzz targets' units are in the asan tree's database only
  tidy_log="$(mktemp /tmp/hostagent-tidy.XXXXXX)"
  tidy_start=$(date +%s%N)
  # A session of its own is an autogroup of its own (sched_autogroup_enabled, as on Debian), and
  # autogroups share the CPUs equally whatever their processes' nice: measured, the niced
  # clang-tidy had half the CPUs beside the asan build. So the autogroup is niced too (sched(7),
  # "The autogroup feature"; raising it needs no privilege).
  setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 scripts/lint.sh --tidy' \
    >"$tidy_log" 2>&1 &
  tidy_pid=$!
}
wait_tidy() {
  local status=0
  wait "$tidy_pid" || status=$?
  tidy_pid=""
  cat "$tidy_log"
  phase_extra="; it ran $(seconds_since "$tidy_start") s from its start"
  return "$status"
}
stop_tidy() { [[ -z $tidy_pid ]] || kill -- "-$tidy_pid" 2>/dev/null || true; }
trap 'print_summary; stop_tidy; remove_scratch' EXIT
# The machine's busy and total CPU time so far (/proc/stat's first line, in ticks: user nice system
# idle iowait irq softirq steal; busy leaves out idle, iowait and steal), for each phase's share.
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8+$9; exit}' /proc/stat; }
cpu_busy_since() {
  local busy total busy0="$1" total0="$2"
  read -r busy total < <(cpu_ticks)
  (( total > total0 )) && echo "$(( 100 * (busy - busy0) / (total - total0) ))%" || echo "-"
}
# phase NAME NOTE COMMAND...: runs the command as one phase of the summary.
phase() {
  current="$1"
  local note="$2" busy0 total0
  shift 2
  echo "=== $current"
  phase_start=$(date +%s%N)
  read -r busy0 total0 < <(cpu_ticks)
  phase_extra=""
  "$@"
  summary+=("$(printf '%-12s %8s %5s  %s%s' "$current" "$(seconds_since "$phase_start")" \
    "$(cpu_busy_since "$busy0" "$total0")" "$note" "$phase_extra")")
  current=""
}
# A build, with ccache's hits and misses for the phase table (phase_extra).
build_tree() {
  ccache --zero-stats >/dev/null 2>&1 || true
  scripts/build.sh "$@"
  if command -v ccache >/dev/null; then
    phase_extra="$(ccache --print-stats 2>/dev/null | awk -F'\t' '
      $1=="direct_cache_hit"||$1=="preprocessed_cache_hit"{h+=$2} $1=="cache_miss"{m=$2}
      END{printf "; ccache %d hits, %d misses", h, m}')"
    echo "build $1:${phase_extra#;}"
  fi
}
# The suites' scratch directories (TMPDIR, tests/support's TempDir) on a tmpfs of this run's own:
# their fixtures write and remove whole sysfs trees, and a vfio test that takes 5-7 s with them on
# the ext4 root takes 0.8-1.3 s on /dev/shm. Mode 1777 as /tmp, so that QEMU's user reaches what the
# libvirtd suites hand it. Removed when the run ends; /tmp where /dev/shm is no tmpfs.
use_tmpfs_scratch() {
  if [[ "$(stat -f -c %T /dev/shm 2>/dev/null)" != tmpfs ]]; then
    echo "test.sh: /dev/shm is not a tmpfs; the suites' scratch stays in ${TMPDIR:-/tmp}"
    return 0
  fi
  scratch="$(mktemp -d /dev/shm/hostagent-tests.XXXXXX)"
  chmod 1777 "$scratch"
  export TMPDIR="$scratch"
}
scratch=""
remove_scratch() { [[ -z $scratch ]] || rm -rf --one-file-system "$scratch"; }
# The verify-guest boots print their times (tests/verify) into the tree; listed here.
test_tree() {
  rm -f "build/$1/verify-guest-times.txt"
  ctest --preset "$2"
  if [[ -f "build/$1/verify-guest-times.txt" ]]; then
    echo "=== verify-guest boots ($1)"
    cat "build/$1/verify-guest-times.txt"
  fi
}

install_all() {
  scripts/install-deps.sh
  scripts/lib/redocly.sh install
  scripts/lib/promtool.sh install
  print_stack
}
# The stack this machine runs (scripts/install-deps.sh chose it); the package phase prints Debian
# 12's, in its root.
print_stack() {
  local qemu libvirt kernel oldest kernels
  qemu="$(qemu-system-x86_64 --version | awk 'NR == 1 {print $4}')"
  libvirt="$(libvirtd --version | awk '{print $NF}')"
  mapfile -t kernels < <(find /boot -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed 's/^vmlinuz-//' | sort -V)
  kernel="${kernels[-1]}"
  oldest="${kernels[0]}"
  echo "stack ${HOSTAGENT_STACK:-current}: QEMU $qemu, libvirt $libvirt, the guests' and emulated host's kernel $kernel" \
    "(the host-life boots: $oldest, then $kernel)"
  phase_extra="; stack ${HOSTAGENT_STACK:-current}: QEMU $qemu, libvirt $libvirt, kernel $kernel (and $oldest)"
}

phase install "scripts/install-deps.sh, the OpenAPI lint's Redocly CLI, promtool" install_all
use_tmpfs_scratch
if [[ $mode == unit ]]; then
  phase build "default tree" build_tree default
  phase test "default tree, unit tier (ctest --preset unit)" test_tree default unit
  exit 0
fi

if [[ -z "${HOSTAGENT_REFERENCE_DATA:-}" && -d ../shared/data ]]; then
  HOSTAGENT_REFERENCE_DATA="$(cd ../shared/data && pwd)"
  export HOSTAGENT_REFERENCE_DATA
fi
echo "HOSTAGENT_REFERENCE_DATA=${HOSTAGENT_REFERENCE_DATA:-<unset: reference-data tests will be skipped>}"
phase format "clang-format, test names" scripts/lint.sh --format
# A real libvirtd with QEMU for the lifecycle tests. Here its absence is a failure, not a skip.
# Both services are started anew, owned by this run: CI begins as the session before it ends, and
# a libvirtd or Placement that session left answered the start's check, then went (stop 51).
phase libvirtd "scripts/libvirtd.sh restart" scripts/libvirtd.sh restart
export HOSTAGENT_REQUIRE_LIBVIRTD=1
# A real Placement for the fleet suites, on loopback with a fresh database. Likewise required.
phase placement "scripts/placement.sh restart" scripts/placement.sh restart
HOSTAGENT_PLACEMENT_URL="$(scripts/placement.sh url)"
export HOSTAGENT_PLACEMENT_URL HOSTAGENT_REQUIRE_PLACEMENT=1
# The OpenAPI lint's pinned Redocly CLI, installed above: its absence fails the test too.
export HOSTAGENT_REQUIRE_REDOCLY=1
# And the metrics check's promtool.
export HOSTAGENT_REQUIRE_PROMTOOL=1
# The current stack's host-life boots start on Debian 12's kernel and reboot into the stack's
# (scripts/install-deps.sh installs both): one kernel there fails the run.
if [[ ${HOSTAGENT_STACK:-current} == current ]]; then export HOSTAGENT_REQUIRE_KERNEL_UPGRADE=1; fi
# The default tree builds what its pass and the packages use (the default_pass target: the suites
# of the asan pass are that tree's alone); --unit above builds all of it.
phase build "default tree (gcc), the default_pass target" build_tree default default_pass
phase "tidy start" "the asan tree configured; clang-tidy to the background" start_tidy
phase test "default tree: kernel and verify-guest boots, the fleet test" test_tree default default
phase "build asan" "asan tree (clang, ASan+UBSan, fuzz targets)" build_tree asan
phase "test asan" "asan tree: every unit suite, the daemon against libvirtd" test_tree asan asan
phase fuzz "asan tree's fuzz targets, 20 s each" scripts/fuzz.sh --seconds 20
phase package "from the default tree: .deb, .rpm, a Debian 12 root" scripts/package.sh
phase clang-tidy "every unit, cached by what it reads; waited for" wait_tidy
