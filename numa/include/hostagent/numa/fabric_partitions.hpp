// numa/fabric_partitions: the shared NVSwitch model's partitions as values. Fabric Manager runs on
// the host, keeps the NVSwitches and offers a fixed set of GPU partitions (an HGX 8-GPU baseboard:
// one of 8, two of 4, four of 2, eight of 1), each named by its GPUs' module IDs, which are not PCI
// order. A VM with k GPUs takes one whole partition of k; FM activates it before the VM starts.
// fabric/ reads these values from FM; placement and the views judge them here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/pci_address.hpp"

namespace hostagent::numa {

using PartitionId = uint32_t;

// One GPU of a partition as FM reports it.
struct PartitionGpu {
  uint32_t module_id = 0;  // FM's physicalId: the GPU's module ID on the baseboard
  PciAddress address;      // from FM's pciBusId
  uint32_t nvlinks_available = 0;
  uint32_t nvlinks_max = 0;
  auto operator<=>(const PartitionGpu&) const = default;
};

struct FabricPartition {
  PartitionId id = 0;
  bool active = false;
  std::vector<PartitionGpu> gpus;
  bool operator==(const FabricPartition&) const = default;
};

// What FM reports of the fabric at one moment.
struct FabricReport {
  // False while FM initialises, or after a restart in its resiliency mode until it is told which
  // partitions are active (fmSetActivatedFabricPartitions): it then serves nothing, and the rest
  // of the report is empty.
  bool ready = true;
  std::vector<FabricPartition> partitions;  // every partition FM supports, in FM's order
  // Partitions FM lists as unsupported (an NVSwitch or trunk failed, a GPU excluded), by ID.
  std::vector<PartitionId> unsupported;
  // Devices FM found with failed NVLinks at its start (empty on HGX H100, whose links train in
  // hardware: FM's SDK documentation).
  std::vector<PciAddress> failed_gpus;
  std::vector<PciAddress> failed_nvswitches;
  // False when FM could not say (fmGetNvlinkFailedDevices is not served after a restart in FM's
  // resiliency mode): the lists above are then empty, not known empty.
  bool failures_read = true;
  bool operator==(const FabricReport&) const = default;
};

// Whether two partitions have a GPU in common (FM activates no two such at once).
bool shares_gpu(const FabricPartition& a, const FabricPartition& b);

// Why a partition cannot be given, or nullopt when it can be: FM lists it unsupported, or one of
// its GPUs has failed NVLinks. A partition active now is not gated by this: it is in use.
std::optional<std::string> partition_gate(const FabricReport& report, const FabricPartition& partition);

// The partitions a new VM could take now: supported, not gated, not active, and sharing no GPU with
// an active one (FM refuses to activate a partition that overlaps an active one).
std::vector<const FabricPartition*> free_partitions(const FabricReport& report);

// How many partitions of each size free_partitions counts ({2: 4, 4: 2, ...}).
std::map<size_t, size_t> free_partitions_by_size(const FabricReport& report);

// "partition 3 (modules 1,2: 0000:18:00.0, 0000:2a:00.0)", for messages and views.
std::string describe(const FabricPartition& partition);

}  // namespace hostagent::numa
