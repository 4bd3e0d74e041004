// discovery/hugepage_reader: free_hugepages per node and pool, now.
#include "hostagent/discovery/hugepage_reader.hpp"

#include <string>

namespace hostagent::numa {

Result<std::map<std::pair<int, uint64_t>, uint64_t>> read_free_hugepages(const SysfsRoot& sysfs,
                                                                         const HostModel& host) {
  std::map<std::pair<int, uint64_t>, uint64_t> out;
  for (const auto& node : host.numa_nodes) {
    for (const auto& pool : node.hugepages) {
      const auto path = "/sys/devices/system/node/node" + std::to_string(node.id) + "/hugepages/hugepages-" +
                        std::to_string(pool.page_size_bytes / 1024) + "kB/free_hugepages";
      HA_TRY(const auto free, sysfs.read_optional_int(path));
      if (free && *free >= 0) out[{node.id, pool.page_size_bytes}] = static_cast<uint64_t>(*free);
    }
  }
  return out;
}

}  // namespace hostagent::numa
