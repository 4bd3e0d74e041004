// What others hold is not free: a domain hostagent did not make is never touched, and its pinned
// CPUs, passthrough functions and hugepages are never given to a VM; hugepages the kernel no longer
// has free (taken outside hostagent) are not placed either.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "daemon_fixture.hpp"
#include "hostagent/common/sysfs_root.hpp"

namespace hostagent::testing {
namespace {

bool shares(const std::vector<int>& a, const std::vector<int>& b) {
  return std::any_of(a.begin(), a.end(), [&](int cpu) { return std::find(b.begin(), b.end(), cpu) != b.end(); });
}

// A domain made by another tool, pinned to `cpus`, passing `device` through, backed by 1 GiB pages
// on host node 0.
std::string foreign_xml(const std::vector<int>& cpus, const PciAddress& device,
                        const std::string& name = "other-tool") {
  std::string pins;
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    pins += "<vcpupin vcpu='" + std::to_string(i) + "' cpuset='" + std::to_string(cpus[i]) + "'/>";
  }
  char address[160];
  std::snprintf(address, sizeof address, "<address domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>",
                device.domain, device.bus, device.device, device.function);
  return "<domain type='test'><name>" + name +
         "</name><memory unit='GiB'>8</memory>"
         "<memoryBacking><hugepages><page size='1' unit='GiB'/></hugepages></memoryBacking>"
         "<vcpu placement='static'>" +
         std::to_string(cpus.size()) + "</vcpu><cputune>" + pins +
         "</cputune><numatune><memory mode='strict' nodeset='0'/></numatune>"
         "<os><type>hvm</type></os><devices><hostdev mode='subsystem' type='pci' managed='yes'><source>" +
         address + "</source></hostdev></devices></domain>";
}

TEST_CASE("a foreign domain's pinned CPUs, passthrough GPU and hugepages are never given to a VM") {
  DaemonFixture fixture;
  numa::Allocation first;
  {
    auto service = started(fixture);
    auto probe = create_vm(*service, fixture.request("probe", kOneGpu));
    REQUIRE_MESSAGE(probe.ok(), probe.error().message);
    first = probe->record->allocation;
    REQUIRE(delete_vm(*service, vm_name("probe")).ok());
  }
  // What the first VM got, another tool takes.
  const std::vector<int> taken(first.cpus.begin(), first.cpus.begin() + 4);
  const PciAddress gpu = first.devices.front();
  const auto defined = fixture.libvirt().define(foreign_xml(taken, gpu));
  REQUIRE_MESSAGE(defined.ok(), defined.error().message);

  auto service = started(fixture);
  CHECK(service->status().last_reconcile.foreign.size() == 2);  // the driver's own "test" too
  const auto usage = service->usage();
  const auto other = std::find_if(usage.held.begin(), usage.held.end(),
                                  [](const numa::Allocation& a) { return a.vm == "other-tool"; });
  REQUIRE(other != usage.held.end());
  CHECK(other->cpus == taken);
  CHECK(other->devices == std::vector<PciAddress>{gpu});
  CHECK(other->hugepages == std::map<int, uint64_t>{{0, 8}});

  auto after = create_vm(*service, fixture.request("after", kOneGpu));
  REQUIRE_MESSAGE(after.ok(), after.error().message);
  const auto& got = after->record->allocation;
  CHECK_FALSE(shares(got.cpus, taken));
  CHECK(std::find(got.devices.begin(), got.devices.end(), gpu) == got.devices.end());
  // All eight GPUs no longer fit: one is the other tool's.
  REQUIRE(delete_vm(*service, vm_name("after")).ok());
  const auto eight = create_vm(*service, fixture.request("eight", kEightGpus));
  REQUIRE_FALSE(eight.ok());
  CHECK(eight.error().code == ErrorCode::does_not_fit);
  CHECK_MESSAGE(contains(eight.error().message, "other-tool"), eight.error().message);
}

// Issue 43, defect 4: "Test VM" is a name libvirt takes and hostagent's rule does not. Its GPU was
// never marked, so it went back to placement uncleaned when the domain went.
TEST_CASE("a foreign domain named outside hostagent's rule has its devices marked, and cleaned once it goes") {
  DaemonFixture fixture;
  PciAddress gpu;
  std::vector<int> cpus;
  {
    auto service = started(fixture);
    auto probe = create_vm(*service, fixture.request("probe", kOneGpu));
    REQUIRE_MESSAGE(probe.ok(), probe.error().message);
    gpu = probe->record->allocation.devices.front();
    cpus.assign(probe->record->allocation.cpus.begin(), probe->record->allocation.cpus.begin() + 2);
    REQUIRE(delete_vm(*service, vm_name("probe")).ok());
  }
  const auto defined = fixture.libvirt().define(foreign_xml(cpus, gpu, "Test VM"));
  REQUIRE_MESSAGE(defined.ok(), defined.error().message);
  auto service = started(fixture);
  const auto marked = service->cleaning();
  const auto entry = std::find_if(marked.begin(), marked.end(), [&](const auto& c) { return c.address == gpu; });
  REQUIRE(entry != marked.end());
  CHECK(entry->vm == "Test VM");
  CHECK(entry->held_by == "Test VM");

  const auto cleanings = [&fixture] {
    std::lock_guard lock(fixture.devices()->mutex);
    return fixture.devices()->cleaned.size();
  }();
  REQUIRE(fixture.libvirt().undefine("Test VM").ok());
  // The service hears of it from libvirt's event and cleans the GPU before it is free (bounded).
  for (int i = 0; i < 1000 && !service->cleaning().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(service->cleaning().empty());
  std::lock_guard lock(fixture.devices()->mutex);
  CHECK(fixture.devices()->cleaned.size() == cleanings + 1);
  CHECK(fixture.devices()->cleaned.back() == gpu);
}

// The simulated host's free_hugepages of the 1 GiB pool on each node, as the kernel would report
// after pages were taken outside hostagent.
void set_kernel_free(const std::filesystem::path& root, int pages) {
  for (const int node : {0, 1}) {
    const auto file = root / ("sys/devices/system/node/node" + std::to_string(node) +
                              "/hugepages/hugepages-1048576kB/free_hugepages");
    REQUIRE(std::filesystem::exists(file));
    std::ofstream(file) << pages << "\n";
  }
}

TEST_CASE("hugepages the kernel no longer has free are not placed, and the refusal says so") {
  DaemonFixture fixture;
  const auto tree = fixture.own_host_tree();
  auto service = started(fixture);
  set_kernel_free(tree, 4);
  const auto refused = create_vm(*service, fixture.request("big", kOneGpu));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK_MESSAGE(contains(refused.error().message, "the kernel has 4 free that no VM is still to take"),
                refused.error().message);
  CHECK(test_driver_domains("big").empty());

  set_kernel_free(tree, 900);
  auto placed = create_vm(*service, fixture.request("big", kOneGpu));
  REQUIRE_MESSAGE(placed.ok(), placed.error().message);
}

}  // namespace
}  // namespace hostagent::testing
