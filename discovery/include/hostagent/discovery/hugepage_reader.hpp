// hostagent/discovery/hugepage_reader: the hugepages each NUMA node's pools have free now, read
// again at each placement (the model's counts are from the daemon's start).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/numa/host_model.hpp"

namespace hostagent::discovery {

// A node's pool of one page size: /sys/devices/system/node/nodeN/hugepages/hugepages-SIZEkB
// (Documentation/admin-guide/mm/hugetlbpage.rst), where nr_hugepages and free_hugepages are.
std::string hugepage_pool_dir(int node, uint64_t page_size_bytes);

// free_hugepages of every pool the model knows, by {node, page size in bytes}
// (/sys/devices/system/node/nodeN/hugepages/hugepages-SIZEkB/, Documentation/admin-guide/mm/
// hugetlbpage.rst). A pool whose file is gone is left out; one that cannot be read is an error.
Result<std::map<std::pair<int, uint64_t>, uint64_t>> read_free_hugepages(const SysfsRoot& sysfs,
                                                                         const numa::HostModel& host);

}  // namespace hostagent::discovery
