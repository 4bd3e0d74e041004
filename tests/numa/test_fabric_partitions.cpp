// numa/fabric_partitions: which of Fabric Manager's partitions a new VM may take, and why not.
#include <doctest/doctest.h>

#include "hostagent/numa/fabric_partitions.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

using numa::FabricPartition;
using numa::FabricReport;
using numa::PartitionGpu;

PartitionGpu gpu(uint32_t module, const std::string& address) {
  return {module, *PciAddress::parse(address), 18, 18};
}

// A four-GPU board: one partition of 4, two of 2, four of 1.
FabricReport four_gpu_board() {
  const PartitionGpu a = gpu(1, "0000:3d:00.0"), b = gpu(2, "0000:18:00.0"), c = gpu(3, "0000:4e:00.0"),
                     d = gpu(4, "0000:2a:00.0");
  FabricReport report;
  report.partitions = {{0, false, {a, b, c, d}}, {1, false, {a, b}}, {2, false, {c, d}}, {3, false, {a}},
                       {4, false, {b}},          {5, false, {c}},    {6, false, {d}}};
  return report;
}

}  // namespace

TEST_CASE("a free partition shares no GPU with an active one, and an active one is not free") {
  FabricReport report = four_gpu_board();
  CHECK(numa::free_partitions_by_size(report) == std::map<size_t, size_t>{{1, 4}, {2, 2}, {4, 1}});
  report.partitions[1].active = true;  // modules 1 and 2
  CHECK(numa::free_partitions_by_size(report) == std::map<size_t, size_t>{{1, 2}, {2, 1}});
  std::vector<numa::PartitionId> free;
  for (const FabricPartition* partition : numa::free_partitions(report)) free.push_back(partition->id);
  CHECK(free == std::vector<numa::PartitionId>{2, 5, 6});
}

TEST_CASE("a partition is gated when FM lists it unsupported or one of its GPUs has failed NVLinks, saying which") {
  FabricReport report = four_gpu_board();
  CHECK_FALSE(numa::partition_gate(report, report.partitions[0]).has_value());
  report.unsupported = {2};
  CHECK(numa::partition_gate(report, report.partitions[2]) == "Fabric Manager lists partition 2 as unsupported");
  report.failed_gpus = {*PciAddress::parse("0000:18:00.0")};
  CHECK(numa::partition_gate(report, report.partitions[1]) ==
        "GPU 0000:18:00.0 (module 2) has failed NVLinks (Fabric Manager)");
  CHECK(numa::free_partitions_by_size(report) == std::map<size_t, size_t>{{1, 3}});
}

TEST_CASE("a partition is described by its module IDs and its GPUs' PCI addresses, in FM's order") {
  const FabricReport report = four_gpu_board();
  CHECK(numa::describe(report.partitions[2]) == "partition 2 (modules 3,4: 0000:4e:00.0, 0000:2a:00.0)");
  CHECK(numa::describe(report.partitions[4]) == "partition 4 (module 2: 0000:18:00.0)");
}

}  // namespace hostagent::testing
