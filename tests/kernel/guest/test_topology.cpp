// Inside the emulated GPU host: the machine is what emulated_host.hpp says, and the kernel groups
// its devices for the IOMMU the way vfio/ expects (drivers/iommu/iommu.c pci_device_group).
#include <doctest/doctest.h>

#include "../emulated_host.hpp"
#include "guest_host.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

constexpr int kAcsCapability = 0x000d;  // PCI_EXT_CAP_ID_ACS

// The node whose expander bridge's bus range holds bus.
int node_of_bus(int bus) {
  int node = -1;
  for (int n = 0; n < host::kNodes; ++n) {
    if (bus >= host::kBusBase.at(n)) node = n;
  }
  return node;
}

TEST_CASE("the guest has the emulated host's NUMA nodes and devices, each device on its expander bridge's node") {
  const auto nodes = sysfs().list("/sys/devices/system/node", false).value();
  int node_count = 0;
  for (const auto& name : nodes) node_count += name.starts_with("node") ? 1 : 0;
  CHECK(node_count == host::kNodes);

  const auto edus = pci_functions(host::kEduVendor, host::kEduDevice);
  const auto nvmes = pci_functions(host::kNvmeVendor, host::kNvmeDevice);
  CHECK(edus.size() == static_cast<std::size_t>(host::kNodes * host::kEduPerNode));
  CHECK(nvmes.size() == static_cast<std::size_t>(host::kNodes));
  CHECK(pci_functions(host::kAtsEndpointVendor, host::kAtsEndpointDevice).size() == 1);
  for (const auto& device : edus) {
    INFO(device.to_string());
    CHECK(sysfs().read_int(pci_path(device, "numa_node")).value() == node_of_bus(device.bus));
  }
  for (const auto& device : nvmes) {
    INFO(device.to_string());
    CHECK(sysfs().read_int(pci_path(device, "numa_node")).value() == node_of_bus(device.bus));
    CHECK(sysfs().read_int(pci_path(device, "sriov_totalvfs")).value() == host::kNvmeMaxVfs);
  }
}

TEST_CASE("the IOMMU is on and every emulated endpoint is in an IOMMU group") {
  CHECK(!sysfs().list("/sys/class/iommu", false).value().empty());
  std::vector<PciAddress> endpoints = pci_functions(host::kEduVendor, host::kEduDevice);
  for (const auto& nvme : pci_functions(host::kNvmeVendor, host::kNvmeDevice)) endpoints.push_back(nvme);
  REQUIRE(!endpoints.empty());
  for (const auto& device : endpoints) {
    INFO(device.to_string());
    CHECK(iommu_group_of(device) >= 0);
  }
}

TEST_CASE(
    "an endpoint under a switch port without ACS shares the port's group, under a root port with ACS it is alone") {
  for (const auto& edu : pci_functions(host::kEduVendor, host::kEduDevice)) {
    INFO(edu.to_string());
    const auto port = parent_bridge(edu);
    REQUIRE(port.has_value());
    CHECK(sysfs().read(pci_path(*port, "device")).value() == "0x8233");  // TI XIO3130 downstream
    CHECK_FALSE(ext_capability(*port, kAcsCapability).has_value());
    // The port is a bridge: vfio/ leaves it with pcieport when it binds the group.
    CHECK(group_members(iommu_group_of(edu)) == std::vector<PciAddress>{*port, edu});
    CHECK(driver_of(*port) == std::optional<std::string>("pcieport"));
  }
  for (const auto& nvme : pci_functions(host::kNvmeVendor, host::kNvmeDevice)) {
    INFO(nvme.to_string());
    const auto port = parent_bridge(nvme);
    REQUIRE(port.has_value());
    CHECK(ext_capability(*port, kAcsCapability).has_value());
    CHECK(group_members(iommu_group_of(nvme)) == std::vector<PciAddress>{nvme});
  }
}

}  // namespace
}  // namespace hostagent::testing::guest
