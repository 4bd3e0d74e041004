// numa/placement: where a VM goes on a host. A pure function of (host model, what other VMs hold,
// host policy, request) to a placement or the reason there is none; deterministic, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/affinity.hpp"
#include "hostagent/numa/fabric_partitions.hpp"
#include "hostagent/numa/host_model.hpp"

namespace hostagent::numa {

// What one existing VM holds. The daemon keeps these in each domain's metadata.
struct Allocation {
  std::string vm;
  std::vector<int> cpus;            // vCPU pins and emulator-exclusive CPUs
  std::vector<PciAddress> devices;  // GPUs with their IOMMU group companions, VFs, NVMe, NVSwitches
  uint64_t hugepage_size_bytes = 1ULL << 30;
  std::map<int, uint64_t> hugepages;  // host NUMA node -> pages held
  // ACS ports relaxed for this VM's peer-to-peer (numa/p2p_isolation.hpp): what lies below them
  // is kept from other VMs while it exists.
  std::vector<PciAddress> p2p_ports;
  // Shared NVSwitch mode: the Fabric Manager partition that is its GPUs, active while it runs.
  std::optional<PartitionId> fabric_partition;
  bool operator==(const Allocation&) const = default;
};

// Why a device is out of placement: a tenant's device not yet cleaned (or being cleaned), or one
// quarantined until an operator clears it (a cleaning failed, a bind the kernel refused, a device
// that fell off the bus).
struct Withheld {
  enum class Why { cleaning, quarantined };
  Why why = Why::quarantined;
  std::string reason;  // worded for the one whose create it refuses
};

struct HostPolicy {
  std::vector<int> housekeeping_cpus;  // never pinned to vCPUs; emulator threads run here
  // false when the host model cannot tell free hugepages (an hwloc XML): memory is then placed by
  // node without checking the pools, and the caller says so to the user.
  bool check_hugepages = true;
  // Drivers a device (or a member of its IOMMU group) may be taken from; empty: the default list
  // (host_use.hpp). The binder refuses the same members: placement refuses them first, with why.
  std::vector<std::string> releasable_drivers;
  // Hugepages the kernel has free now that no holder is still to take (a held VM that is not
  // running has not taken its pages from the pool yet), by {host node, page size in bytes}. Where
  // a pool has an entry, placement takes the lower of it and the pool's total less what is held:
  // pages taken outside hostagent (a process on hugetlbfs, a domain bound to no node) are not
  // free. Empty: not read (an hwloc XML, a test), the accounting alone.
  std::map<std::pair<int, uint64_t>, uint64_t> unclaimed_hugepages;
  // Devices out of placement (issue 19's lifecycle), each with why: never given, alone or as a
  // group companion.
  std::map<PciAddress, Withheld> withheld;
  // Shared NVSwitch mode: what Fabric Manager reports now. A request with GPUs then takes exactly
  // the GPUs of one free partition of its size (numa/fabric_partitions.hpp), and no VM takes an
  // NVSwitch: FM keeps them on the host. nullopt: full passthrough (numa/nvlink.hpp).
  std::optional<FabricReport> fabric;
};

struct DeviceId {
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
};

struct PlacementRequest {
  int vcpus = 0;
  uint64_t memory_bytes = 0;
  uint64_t hugepage_size_bytes = 1ULL << 30;
  int gpus = 0;
  std::vector<DeviceId> gpu_ids;  // empty: any GPU
  int vfs_per_gpu = 0;            // VFs from the NIC under each GPU's switch
  int extra_vfs = 0;              // VFs not tied to a GPU
  int whole_nics = 0;             // NIC PFs given whole (HCAs without VFs), nearest the GPUs
  bool nic_strict = true;         // false: a NIC on the GPU's NUMA node will do
  int nvme = 0;
  bool peer_to_peer = false;       // prefer GPUs sharing a switch; relax ACS/ATS where isolation allows
  std::optional<int> guest_cells;  // nullopt: one guest cell per host node the devices use
};

struct PlacedDevice {
  PciAddress address;
  std::optional<int> host_node;
  std::optional<PciAddress> host_switch;  // upstream port of the switch above it on the host
  int guest_cell = 0;
  std::optional<Affinity> affinity = std::nullopt;  // a GPU's VF: how it reaches its GPU on the host (PIX, PXB, ...)
};

struct PlacedGpu {
  PlacedDevice gpu;
  std::vector<PciAddress> companions;  // the rest of its IOMMU group (audio functions), bridges aside
  std::vector<PlacedDevice> vfs;       // its NIC VFs, under its switch when one was found
  // With whole NICs: the placed NIC nearest it (Placement::whole_nics), which NCCL will pair it with.
  std::optional<PciAddress> nic;
  std::optional<Affinity> nic_affinity;
  int clique = 0;  // peer-to-peer clique id: GPUs below one root port (one switch tree)
};

struct GuestCell {
  int id = 0;
  int host_node = 0;
  std::vector<int> vcpus;      // guest vCPU ids, ascending
  std::vector<int> host_cpus;  // host CPU of each vCPU, same order: the 1:1 pins
  uint64_t memory_bytes = 0;
  uint64_t hugepages = 0;  // pages of the request's hugepage size, strict on host_node
};

struct GuestCpuTopology {
  int sockets = 1;  // one per guest cell
  int cores = 1;    // per socket
  int threads = 1;  // 2 when vCPU pairs are pinned to the two SMT threads of one host core
};

// A port above a peer-to-peer VM's devices left as the host set it, and why.
struct KeptPort {
  PciAddress port;
  std::string reason;
  bool operator==(const KeptPort&) const = default;
};

struct Placement {
  std::vector<GuestCell> cells;
  std::vector<PlacedGpu> gpus;
  std::vector<PlacedDevice> extra_vfs;
  std::vector<PlacedDevice> whole_nics;  // NIC PFs given whole; affinity: to the nearest placed GPU
  std::vector<PlacedDevice> nvme;
  // Every NVSwitch of the host, when the VM takes every GPU its fabric joins (numa/nvlink.hpp);
  // otherwise none.
  std::vector<PlacedDevice> nvswitches;
  std::vector<int> emulator_cpus;  // the housekeeping CPUs
  GuestCpuTopology topology;
  // Peer-to-peer, for a request that asks for it (numa/p2p_isolation.hpp): the ACS ports relaxed
  // for it, and those kept as the host set them because another VM or the host has a device there.
  std::vector<PciAddress> p2p_ports;
  std::vector<KeptPort> p2p_kept;
  // Shared NVSwitch mode: the partition that is the GPUs, which FM activates before the VM starts.
  std::optional<FabricPartition> fabric_partition;
};

// Fails with ErrorCode::does_not_fit and a message that names what is missing and who holds it,
// e.g. "needs 8 GPUs with a NIC on their switch; free: 6 (0000:1b:00.0 and 0000:9a:00.0 held by vm
// train-3)". Fails with invalid_argument on a request that no host could satisfy, and in shared
// NVSwitch mode with unavailable while Fabric Manager is not ready.
Result<Placement> place(const HostModel& host, const std::vector<Allocation>& existing, const HostPolicy& policy,
                        const PlacementRequest& request);

// What a placement holds, to record and to pass as `existing` to the next placement.
Allocation allocation_of(const std::string& vm, const Placement& placement, uint64_t hugepage_size_bytes);

// The guest cell of a device on host node `node` (the one rule; placement, render and verify-guest
// hold the guest to it, docs/devices.md "A device whose node has no cell"):
//  - the cell on its node, or on the nearest node with CPUs when its own has none (a CPU-less
//    node, GPU memory on Grace, lends its devices);
//  - with no cell there (a node the placement gives no cell: a Sub-NUMA-Clustering node with only
//    NVSwitches, or a template that folds nodes into fewer cells), the cell whose host node is
//    nearest by the host's SLIT, the lowest id on a tie;
//  - cell 0 when the node is unknown or the host has no SLIT row for it.
int guest_cell_for(const HostModel& host, const std::vector<GuestCell>& cells, const std::optional<int>& node);

// The placement's NIC VFs in placement order: each GPU's VFs, then the extra VFs. The order the
// guest's PCI layout numbers them in, and so the order of their MACs.
std::vector<PciAddress> placed_vfs(const Placement& placement);

}  // namespace hostagent::numa
