// api/rest, private: what the host has free, per NUMA node, as placement would count it. Placement's
// own inventory is private to numa/; this mirrors its rules (numa/src/placement_inventory.cpp) so
// that /v1/host/capacity and the free_* metrics never promise what a create would then refuse.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <vector>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::api::detail {

struct Count {
  int total = 0;
  int free = 0;
};

struct PoolCapacity {
  uint64_t page_size_bytes = 0;
  uint64_t total = 0;
  uint64_t free = 0;  // the pool's pages less those VMs hold (placement reserves from the total)
};

struct CpuCapacity {
  int total = 0;
  int free = 0;  // online, not housekeeping, held by no VM
  int housekeeping = 0;
  int held = 0;
  int offline = 0;
};

struct NodeCapacity {
  int node = 0;
  CpuCapacity cpus;
  Count gpus;  // free: the GPU and its whole IOMMU group are free (it can be given whole)
  Count vfs;   // free: alone in its IOMMU group, held by no VM, not bound to vfio-pci by a stranger
  Count nvme;  // free: as VFs
  std::vector<PoolCapacity> hugepages;  // by page size
};

struct Capacity {
  std::vector<NodeCapacity> nodes;  // NUMA nodes with CPUs; a CPU-less node's devices count on its nearest
  NodeCapacity totals;              // every node, and devices on no known node; node is -1
};

Capacity compute_capacity(const numa::HostModel& host, const std::vector<numa::Allocation>& held,
                          const std::vector<int>& housekeeping_cpus);

boost::json::value capacity_json(const Capacity& capacity);

}  // namespace hostagent::api::detail
