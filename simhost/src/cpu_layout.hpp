// simhost/cpu_layout: which logical CPU numbers a HostSpec's nodes get, and each CPU's package,
// core and thread. Pure; both the CPU/node writer and the PCI writer (local_cpus) use it.
#pragma once

#include <vector>

#include "hostagent/simhost/sim_host.hpp"

namespace hostagent::simhost::detail {

struct CpuSlot {
  int id = 0;
  int node_index = 0;  // index into HostSpec::nodes
  int package = 0;
  int core_id = 0;  // unique within its package, shared by SMT siblings
  int thread = 0;   // 0 for the first thread of a core
};

struct CpuLayout {
  std::vector<CpuSlot> cpus;                // by CPU number
  std::vector<std::vector<int>> node_cpus;  // by node index, ascending
  std::vector<int> all_cpus() const;
  std::vector<int> package_cpus(int package) const;
  std::vector<int> core_cpus(const CpuSlot& cpu) const;
};

// Numbers CPUs as Intel hosts enumerate them (ACPI MADT order): the first thread of every core,
// node after node, then the second threads in the same order. On 2 nodes x 40 cores x 2 threads,
// node 0 holds 0-39 and 80-119, node 1 holds 40-79 and 120-159.
CpuLayout layout_cpus(const HostSpec& spec);

}  // namespace hostagent::simhost::detail
