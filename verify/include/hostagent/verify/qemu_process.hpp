// verify/qemu_process: what the kernel says of a running stand-in's QEMU process, held against the
// ties the stand-in kept (stand_in.hpp's StandInTies): each thread's CPU affinity, and the NUMA
// policy of each guest cell's memory and the nodes its pages are on. Read from /proc (proc(5):
// /proc/PID/cmdline, /proc/PID/task/TID/status, /proc/PID/numa_maps); the parsers are apart from
// the reading, so that each is tested on text written by hand.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/verify/stand_in.hpp"

namespace hostagent::verify {

struct QemuThread {
  int tid = 0;
  std::string name;       // status's Name: libvirt starts QEMU with debug-threads=on, so a vCPU
                          // thread is "CPU 3/TCG" or "CPU 3/KVM" (QEMU's qemu_thread_create names)
  std::vector<int> cpus;  // Cpus_allowed_list: the affinity the kernel enforces
};

// One guest cell's memory backend. libvirt names cell N's backend "ram-nodeN"
// (qemuBuildMemoryCellBackendProps); QEMU's file of a hugepage backend is
// "qemu_back_mem._objects_ram-nodeN.XXXXXX" in its mem-path, a memfd's is "memfd:ram-nodeN".
struct CellMemory {
  int cell = 0;
  std::string policy;               // mempolicy mode: "bind", "interleave", "prefer", "default", ...
  std::vector<int> policy_nodes;    // the nodes the policy names; empty for default and local
  std::map<int, uint64_t> on_node;  // pages present per node (numa_maps' N<node>=<pages>)
  uint64_t page_kib = 0;            // kernelpagesize_kB
};

struct QemuProcess {
  int pid = 0;
  std::vector<QemuThread> threads;  // by tid: the first is the main thread, whose tid is the pid
  std::vector<CellMemory> cells;    // by cell; a cell whose memory is anonymous is not among them
  const QemuThread* vcpu_thread(int vcpu) const;
};

// Whether a NUL-separated command line is QEMU's for domain `name`: libvirt passes
// "-name guest=NAME,debug-threads=on" (qemuBuildNameCommandLine; a ',' in NAME doubled).
bool is_qemu_of(std::string_view cmdline, std::string_view name);
// /proc/PID/task/TID/status: its Name and Cpus_allowed_list.
Result<QemuThread> parse_thread_status(int tid, std::string_view status);
// /proc/PID/numa_maps: the mappings that are a guest cell's memory backend.
Result<std::vector<CellMemory>> parse_numa_maps(std::string_view numa_maps);
// The vCPU a thread runs ("CPU 3/TCG" -> 3), nullopt for any other thread.
std::optional<int> vcpu_of_thread(std::string_view name);

// The running domain's QEMU process on this machine (ROOT/proc); nullopt when none runs it here
// (a libvirt on another machine). A thread that ends while it is read is left out.
Result<std::optional<QemuProcess>> read_qemu_process(const SysfsRoot& machine, std::string_view name);

struct TiesCheck {
  std::vector<std::string> findings;  // a tie the running process does not hold
  std::vector<std::string> held;      // each tie it holds, in words
  std::vector<std::string> unread;    // a tie the process does not show (a cell's anonymous memory)
};

// The main thread on the emulator's CPUs, each vCPU's thread on its own, each cell's memory bound
// (mempolicy bind) to its node, with its pages there and nowhere else.
TiesCheck check_ties(const StandIn& stand_in, const QemuProcess& process);

}  // namespace hostagent::verify
