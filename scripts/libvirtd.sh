#!/usr/bin/env bash
# Starts, stops or restarts a real libvirtd (with virtlogd) on a machine without systemd, as CI and
# the lifecycle tests need, and reserves the hugepages those tests' guests are backed by.
#   scripts/libvirtd.sh start [HUGEPAGES_2M]   (default 1200: two 1 GiB guests and some slack)
#   scripts/libvirtd.sh stop
#   scripts/libvirtd.sh restart [HUGEPAGES_2M]   both daemons anew, owned by the caller (CI's run):
#     one left by an earlier session may be on its way out, and a check that it answers now does
#     not keep it answering for the next hour
# It does not wait for libvirtd to answer: the first start can spend several seconds probing QEMU,
# and every client (the daemon, the tests) retries virConnectOpen until it does.
set -euo pipefail

if [[ ${EUID} -ne 0 ]]; then
  echo "libvirtd.sh: run as root (it starts the system libvirtd and reserves hugepages)" >&2
  exit 1
fi

running() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

reserve_hugepages() {
  local pages="$1"
  mkdir -p /dev/hugepages
  mountpoint -q /dev/hugepages || mount -t hugetlbfs -o pagesize=2M hugetlbfs /dev/hugepages
  local now
  now="$(cat /proc/sys/vm/nr_hugepages)"
  if ((now < pages)); then
    echo "$pages" >/proc/sys/vm/nr_hugepages
    now="$(cat /proc/sys/vm/nr_hugepages)"
  fi
  # The kernel reserves what it can find contiguous memory for, which may be fewer than asked.
  echo "libvirtd.sh: ${now} hugepages of 2 MiB reserved (asked for ${pages})"
}

start() {
  reserve_hugepages "${1:-1200}"
  mkdir -p /run/libvirt /var/log/libvirt/qemu
  running /run/virtlogd.pid || virtlogd -d
  running /run/libvirtd.pid || libvirtd -d
  echo "libvirtd.sh: libvirtd pid $(cat /run/libvirtd.pid 2>/dev/null || echo '?')"
}

# Stops a daemon and returns once it is gone. A libvirtd asked to stop first finishes its state
# drivers' shutdown, which took over 10 s beside the asan suites (stop 59's CI: the restart found the
# old libvirtd still running, started none, and every later libvirtd test failed). So: SIGTERM, up
# to 60 s to go, then SIGKILL (QEMU outlives libvirtd either way), and an error if even that fails.
stop_pidfile() {
  running "$1" || return 0
  local pid
  pid="$(cat "$1")"
  kill "$pid" 2>/dev/null || return 0
  wait_gone "$pid" 600 && return 0
  echo "libvirtd.sh: $(basename "$1" .pid) (pid $pid) still running 60 s after SIGTERM; SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone "$pid" 100 && return 0
  echo "libvirtd.sh: $(basename "$1" .pid) (pid $pid) survived SIGKILL" >&2
  return 1
}
# wait_gone PID TENTHS: whether PID exits within TENTHS tenths of a second.
wait_gone() {
  for _ in $(seq "$2"); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  ! kill -0 "$1" 2>/dev/null
}

# libvirtd leaves running QEMU processes alone: a restarted libvirtd reattaches to them.
stop() { stop_pidfile /run/libvirtd.pid; }

case "${1:-}" in
  start) start "${2:-1200}" ;;
  stop) stop ;;
  restart)
    stop
    stop_pidfile /run/virtlogd.pid
    start "${2:-1200}"
    ;;
  *)
    echo "usage: scripts/libvirtd.sh start|restart [HUGEPAGES_2M] | stop" >&2
    exit 2
    ;;
esac
