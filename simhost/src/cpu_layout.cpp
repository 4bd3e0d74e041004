// simhost/cpu_layout: CPU numbering of a HostSpec (see cpu_layout.hpp).
#include "cpu_layout.hpp"

#include <algorithm>
#include <map>

namespace hostagent::simhost::detail {

CpuLayout layout_cpus(const HostSpec& spec) {
  CpuLayout layout;
  layout.node_cpus.resize(spec.nodes.size());
  // Core ids restart in each package; nodes that share a package (sub-NUMA clustering) continue it.
  std::map<int, int> next_core_in_package;
  std::vector<int> first_core(spec.nodes.size(), 0);
  int max_threads = 0;
  for (std::size_t n = 0; n < spec.nodes.size(); ++n) {
    const auto& node = spec.nodes[n];
    first_core[n] = next_core_in_package[node.package];
    next_core_in_package[node.package] += node.cores;
    if (node.cores > 0) max_threads = std::max(max_threads, node.threads_per_core);
  }
  for (int thread = 0; thread < max_threads; ++thread) {
    for (std::size_t n = 0; n < spec.nodes.size(); ++n) {
      const auto& node = spec.nodes[n];
      if (thread >= node.threads_per_core) continue;
      for (int core = 0; core < node.cores; ++core) {
        const int id = static_cast<int>(layout.cpus.size());
        layout.cpus.push_back({id, static_cast<int>(n), node.package, first_core[n] + core, thread});
        layout.node_cpus[n].push_back(id);
      }
    }
  }
  for (auto& cpus : layout.node_cpus) std::sort(cpus.begin(), cpus.end());
  return layout;
}

std::vector<int> CpuLayout::all_cpus() const {
  std::vector<int> ids;
  for (const auto& cpu : cpus) ids.push_back(cpu.id);
  return ids;
}

std::vector<int> CpuLayout::package_cpus(int package) const {
  std::vector<int> ids;
  for (const auto& cpu : cpus) {
    if (cpu.package == package) ids.push_back(cpu.id);
  }
  return ids;
}

std::vector<int> CpuLayout::core_cpus(const CpuSlot& of) const {
  std::vector<int> ids;
  for (const auto& cpu : cpus) {
    if (cpu.package == of.package && cpu.core_id == of.core_id) ids.push_back(cpu.id);
  }
  return ids;
}

}  // namespace hostagent::simhost::detail
