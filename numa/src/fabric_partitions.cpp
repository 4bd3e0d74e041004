#include "hostagent/numa/fabric_partitions.hpp"

#include <algorithm>

namespace hostagent::numa {

bool shares_gpu(const FabricPartition& a, const FabricPartition& b) {
  return std::any_of(a.gpus.begin(), a.gpus.end(), [&](const PartitionGpu& gpu) {
    return std::any_of(b.gpus.begin(), b.gpus.end(),
                       [&](const PartitionGpu& other) { return other.address == gpu.address; });
  });
}

std::optional<std::string> partition_gate(const FabricReport& report, const FabricPartition& partition) {
  if (std::find(report.unsupported.begin(), report.unsupported.end(), partition.id) != report.unsupported.end()) {
    return "Fabric Manager lists partition " + std::to_string(partition.id) + " as unsupported";
  }
  for (const PartitionGpu& gpu : partition.gpus) {
    if (std::find(report.failed_gpus.begin(), report.failed_gpus.end(), gpu.address) != report.failed_gpus.end()) {
      return "GPU " + gpu.address.to_string() + " (module " + std::to_string(gpu.module_id) +
             ") has failed NVLinks (Fabric Manager)";
    }
  }
  return std::nullopt;
}

std::vector<const FabricPartition*> free_partitions(const FabricReport& report) {
  std::vector<const FabricPartition*> active;
  for (const FabricPartition& partition : report.partitions) {
    if (partition.active) active.push_back(&partition);
  }
  std::vector<const FabricPartition*> free;
  for (const FabricPartition& partition : report.partitions) {
    if (partition.active || partition_gate(report, partition)) continue;
    const bool overlaps = std::any_of(active.begin(), active.end(),
                                      [&](const FabricPartition* used) { return shares_gpu(*used, partition); });
    if (!overlaps) free.push_back(&partition);
  }
  return free;
}

std::map<size_t, size_t> free_partitions_by_size(const FabricReport& report) {
  std::map<size_t, size_t> sizes;
  for (const FabricPartition* partition : free_partitions(report)) ++sizes[partition->gpus.size()];
  return sizes;
}

std::string describe(const FabricPartition& partition) {
  std::string modules;
  std::string addresses;
  for (const PartitionGpu& gpu : partition.gpus) {
    modules += (modules.empty() ? "" : ",") + std::to_string(gpu.module_id);
    addresses += (addresses.empty() ? "" : ", ") + gpu.address.to_string();
  }
  return "partition " + std::to_string(partition.id) + " (module" + (partition.gpus.size() == 1 ? " " : "s ") +
         modules + ": " + addresses + ")";
}

}  // namespace hostagent::numa
