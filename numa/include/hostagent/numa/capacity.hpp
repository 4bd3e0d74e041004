// numa/capacity: what a host has free, per NUMA node, for the API's /v1/host/capacity and the free_*
// metrics. Counted from placement's own inventory (the one that decides every create), so capacity
// never promises what a create would then refuse: the rule has one owner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::numa {

struct Count {
  int total = 0;
  int free = 0;
  int cleaning = 0;     // held by no VM, out of placement until its cleaning passes
  int quarantined = 0;  // held by no VM, out of placement until an operator clears it
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
  Count nvme;  // free: as VFs; a PF whose VFs are enabled is not NVMe to give (its VFs are)
  std::vector<PoolCapacity> hugepages;  // the node's pools, in the host model's order
};

// One device placement may give, and where it stands: what the counts above are made of, for a
// reader that must name each device (the fleet's provider tree, fleet/).
enum class DeviceKind { gpu, vf, nvme, whole_nic };
enum class DeviceUse { free, held, cleaning, quarantined, unavailable };

struct DeviceStanding {
  PciAddress address;
  DeviceKind kind = DeviceKind::gpu;
  int node = -1;  // the node placement files it under (as NodeCapacity), -1 none known
  DeviceUse use = DeviceUse::free;
  std::string holder;  // held: the VM; unavailable: why (host use, its IOMMU group, ...)
};

struct Capacity {
  std::vector<NodeCapacity> nodes;      // NUMA nodes with CPUs; a CPU-less node's devices count on its nearest
  NodeCapacity totals;                  // every node, and devices on no known node; node is -1
  std::vector<DeviceStanding> devices;  // GPUs, VFs, NVMe, whole NICs (PFs with no VF), address order per kind
};

Capacity capacity(const HostModel& host, const std::vector<Allocation>& held, const HostPolicy& policy);

}  // namespace hostagent::numa
