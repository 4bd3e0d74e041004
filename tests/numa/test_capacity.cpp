// numa/capacity: what /v1/host/capacity and the free_* metrics call free must be what placement would
// give, checked against numa::place on the simulated vela2 host and on hand-made edge cases.
#include <doctest/doctest.h>

#include "hostagent/numa/capacity.hpp"
#include "hostagent/numa/placement.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::numa {
namespace {

using hostagent::testing::kGiB;

numa::PlacementRequest small_request() {
  numa::PlacementRequest request;
  request.vcpus = 2;
  request.memory_bytes = 2 * kGiB;
  request.hugepage_size_bytes = kGiB;
  return request;
}

bool fits(const numa::HostModel& host, const std::vector<numa::Allocation>& held, const numa::HostPolicy& policy,
          const numa::PlacementRequest& request) {
  auto placed = numa::place(host, held, policy, request);
  if (!placed.ok()) MESSAGE(placed.error().message);
  return placed.ok();
}

// Exactly `free` of a kind fits in one VM and one more does not.
template <typename Set>
void check_boundary(const numa::HostModel& host, const std::vector<numa::Allocation>& held,
                    const numa::HostPolicy& policy, int free, Set set) {
  auto request = small_request();
  set(request, free);
  CHECK(fits(host, held, policy, request));
  set(request, free + 1);
  CHECK_FALSE(fits(host, held, policy, request));
}

numa::PciFunction function(const std::string& address, numa::PciRole role, int node, int group) {
  numa::PciFunction f;
  f.address = PciAddress::parse(address).value();
  f.role = role;
  f.numa_node = node;
  f.iommu_group = group;
  f.class_code = role == numa::PciRole::gpu ? 0x030200 : role == numa::PciRole::nvme ? 0x010802 : 0x020000;
  return f;
}

// Two nodes of four CPUs, a CPU-less third node near node 1; GPUs, VFs and NVMe in every situation
// placement distinguishes.
numa::HostModel edge_host() {
  numa::HostModel host;
  for (int node = 0; node < 2; ++node) {
    numa::NumaNode n;
    n.id = node;
    for (int i = 0; i < 4; ++i) n.cpus.push_back(node * 4 + i);
    n.hugepages = {{2ULL << 20, 100, 100}, {kGiB, 8, 8}};
    n.distances = {{0, node == 0 ? 10 : 20}, {1, node == 1 ? 10 : 20}};
    host.numa_nodes.push_back(n);
  }
  numa::NumaNode gpu_memory;
  gpu_memory.id = 2;
  gpu_memory.cpuless = true;
  gpu_memory.distances = {{0, 40}, {1, 30}, {2, 10}};
  host.numa_nodes.push_back(gpu_memory);
  for (int id = 0; id < 8; ++id) {
    numa::Cpu cpu;
    cpu.id = id;
    cpu.core = id / 2;
    cpu.numa_node = id / 4;
    cpu.siblings = {id - id % 2, id - id % 2 + 1};
    cpu.online = id != 7;
    host.cpus.push_back(cpu);
  }
  host.pci_devices = {
      function("0000:10:00.0", numa::PciRole::gpu, 0, 10),  // free
      function("0000:11:00.0", numa::PciRole::gpu, 0, 11),  // held
      function("0000:12:00.0", numa::PciRole::gpu, 1, 12),  // shares group 12 with the next: one of them
      function("0000:12:00.1", numa::PciRole::gpu, 1, 12),
      function("0000:13:00.0", numa::PciRole::gpu, 2, 13),  // on the CPU-less node: counts on node 1
      function("0000:14:00.0", numa::PciRole::gpu, 0, 99),  // its group is not reported
      function("0000:20:00.1", numa::PciRole::nic, 0, 20),  // VF, free
      function("0000:20:00.2", numa::PciRole::nic, 0, 21),  // VF bound to vfio-pci by nobody we know
      function("0000:20:00.3", numa::PciRole::nic, 1, 22),  // VF sharing its group
      function("0000:20:00.4", numa::PciRole::nic, 1, 22),
      function("0000:30:00.0", numa::PciRole::nvme, 1, 30),  // free
      function("0000:31:00.0", numa::PciRole::nvme, 1, 31),  // held
      function("0000:32:00.0", numa::PciRole::nvme, 1, 32),  // a PF with its VFs enabled: not NVMe to give
  };
  host.pci_devices.back().sriov = numa::Sriov{4, 2, {}};
  for (auto& f : host.pci_devices) {
    if (f.role == numa::PciRole::nic) f.physfn = PciAddress::parse("0000:20:00.0").value();
  }
  host.pci_devices[7].driver = "vfio-pci";
  for (const auto& f : host.pci_devices) {
    if (*f.iommu_group == 99) continue;
    auto it = std::find_if(host.iommu_groups.begin(), host.iommu_groups.end(),
                           [&](const numa::IommuGroup& g) { return g.id == *f.iommu_group; });
    if (it == host.iommu_groups.end()) it = host.iommu_groups.insert(host.iommu_groups.end(), {*f.iommu_group, {}});
    it->members.push_back(f.address);
  }
  return host;
}

}  // namespace

TEST_CASE("capacity counts a withheld device as not free, and as cleaning or quarantined while no VM holds it") {
  const auto host = edge_host();
  HostPolicy policy;
  policy.housekeeping_cpus = {0};
  const auto before = numa::capacity(host, {}, policy);
  CHECK(before.nodes[0].gpus.quarantined == 0);
  CHECK(before.nodes[0].gpus.cleaning == 0);
  const auto gpu = PciAddress::parse("0000:11:00.0").value();
  policy.withheld = {{gpu, {Withheld::Why::quarantined, "bind to vfio-pci failed"}}};
  const auto after = numa::capacity(host, {}, policy);
  CHECK(after.nodes[0].gpus.total == before.nodes[0].gpus.total);
  CHECK(after.nodes[0].gpus.free == before.nodes[0].gpus.free - 1);
  CHECK(after.nodes[0].gpus.quarantined == 1);
  CHECK(after.totals.gpus.quarantined == 1);
  CHECK(after.nodes[0].gpus.cleaning == 0);

  policy.withheld = {{gpu, {Withheld::Why::cleaning, "after vm a"}}};
  const auto cleaning = numa::capacity(host, {}, policy);
  CHECK(cleaning.nodes[0].gpus.free == before.nodes[0].gpus.free - 1);
  CHECK(cleaning.nodes[0].gpus.cleaning == 1);
  CHECK(cleaning.nodes[0].gpus.quarantined == 0);
  // Held by a VM (marked to be cleaned once it lets go): held, not cleaning.
  numa::Allocation held;
  held.vm = "a";
  held.devices = {gpu};
  const auto while_held = numa::capacity(host, {held}, policy);
  CHECK(while_held.nodes[0].gpus.free == before.nodes[0].gpus.free - 1);
  CHECK(while_held.nodes[0].gpus.cleaning == 0);
}

TEST_CASE("capacity counts CPUs, devices and hugepages free as placement would") {
  const auto host = edge_host();
  numa::Allocation held;
  held.vm = "vm1";
  held.cpus = {5};
  held.devices = {PciAddress::parse("0000:11:00.0").value(), PciAddress::parse("0000:31:00.0").value()};
  held.hugepage_size_bytes = kGiB;
  held.hugepages = {{0, 3}};
  HostPolicy policy;
  policy.housekeeping_cpus = {0};
  const auto capacity = numa::capacity(host, {held}, policy);

  REQUIRE(capacity.nodes.size() == 2);
  const auto& n0 = capacity.nodes[0];
  const auto& n1 = capacity.nodes[1];
  CHECK(n0.node == 0);
  CHECK(n0.cpus.total == 4);
  CHECK(n0.cpus.housekeeping == 1);
  CHECK(n0.cpus.free == 3);
  CHECK(n1.cpus.held == 1);
  CHECK(n1.cpus.offline == 1);
  CHECK(n1.cpus.free == 2);
  CHECK(n0.gpus.total == 3);
  CHECK(n0.gpus.free == 1);   // 11 held, 14 in no reported group
  CHECK(n1.gpus.total == 3);  // 12.0, 12.1 and the CPU-less node's 13
  CHECK(n1.gpus.free == 2);   // one of group 12, and 13
  CHECK(n0.vfs.total == 2);
  CHECK(n0.vfs.free == 1);
  CHECK(n1.vfs.free == 0);
  CHECK(n1.nvme.total == 2);  // 32.0 drives VFs: placement never gives it, so it is not counted
  CHECK(n1.nvme.free == 1);
  REQUIRE(n0.hugepages.size() == 2);
  CHECK(n0.hugepages[1].page_size_bytes == kGiB);
  CHECK(n0.hugepages[1].free == 5);
  CHECK(n0.hugepages[0].free == 100);  // 2 MiB pages are another pool
  CHECK(capacity.totals.gpus.total == 6);
  CHECK(capacity.totals.gpus.free == 3);
  CHECK(capacity.totals.cpus.free == 5);
  REQUIRE(capacity.totals.hugepages.size() == 2);
  CHECK(capacity.totals.hugepages[1].free == 13);
  CHECK(capacity.totals.nvme.total == 2);
}

TEST_CASE("capacity on vela2 is the boundary of what placement accepts") {
  const auto host = testing::discover_shared("vela2");
  numa::HostPolicy policy;
  policy.housekeeping_cpus = {0, 1};
  std::vector<numa::Allocation> held;

  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    const auto capacity = numa::capacity(host, held, policy);
    REQUIRE(capacity.totals.gpus.free > 0);
    check_boundary(host, held, policy, capacity.totals.gpus.free, [](numa::PlacementRequest& r, int n) { r.gpus = n; });
    check_boundary(host, held, policy, capacity.totals.vfs.free,
                   [](numa::PlacementRequest& r, int n) { r.extra_vfs = n; });
    check_boundary(host, held, policy, capacity.totals.nvme.free, [](numa::PlacementRequest& r, int n) { r.nvme = n; });
    // vCPUs in one guest cell: the most free on any one node fit, one more does not.
    int most = 0;
    for (const auto& node : capacity.nodes) most = std::max(most, node.cpus.free);
    check_boundary(host, held, policy, most, [](numa::PlacementRequest& r, int n) {
      r.guest_cells = 1;
      r.vcpus = n;
    });
    CHECK(capacity.nodes.front().cpus.housekeeping == 2);

    // Then a VM holds some of it, and the next round counts it as taken.
    auto shape = small_request();
    shape.gpus = 2;
    shape.vfs_per_gpu = 1;
    shape.nvme = 1;
    auto placed = numa::place(host, held, policy, shape);
    REQUIRE_MESSAGE(placed.ok(), placed.error().message);
    held.push_back(numa::allocation_of("vm" + std::to_string(round), *placed, kGiB));
    const auto after = numa::capacity(host, held, policy);
    CHECK(after.totals.gpus.free == capacity.totals.gpus.free - 2);
    CHECK(after.totals.nvme.free == capacity.totals.nvme.free - 1);
    CHECK(after.totals.vfs.free == capacity.totals.vfs.free - 2);
    CHECK(after.totals.cpus.free == capacity.totals.cpus.free - static_cast<int>(held.back().cpus.size()));
    CHECK(after.totals.cpus.held == capacity.totals.cpus.held + static_cast<int>(held.back().cpus.size()));
  }
}

}  // namespace hostagent::numa
