// discovery/hugepage_reader: free_hugepages per node and pool, now.
#include "hostagent/discovery/hugepage_reader.hpp"

#include <string>

namespace hostagent::discovery {

std::string hugepage_pool_dir(int node, uint64_t page_size_bytes) {
  return "/sys/devices/system/node/node" + std::to_string(node) + "/hugepages/hugepages-" +
         std::to_string(page_size_bytes / 1024) + "kB";
}

Result<std::map<std::pair<int, uint64_t>, uint64_t>> read_free_hugepages(const SysfsRoot& sysfs,
                                                                         const numa::HostModel& host) {
  std::map<std::pair<int, uint64_t>, uint64_t> out;
  for (const auto& node : host.numa_nodes) {
    for (const auto& pool : node.hugepages) {
      HA_TRY(const auto free,
             sysfs.read_optional_int(hugepage_pool_dir(node.id, pool.page_size_bytes) + "/free_hugepages"));
      if (free && *free >= 0) out[{node.id, pool.page_size_bytes}] = static_cast<uint64_t>(*free);
    }
  }
  return out;
}

}  // namespace hostagent::discovery
