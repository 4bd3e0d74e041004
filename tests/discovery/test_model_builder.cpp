// The pure rules of discovery, on hand-built functions: roles, NUMA nodes for bridges that report
// none, switches and their devices.
#include <doctest/doctest.h>

#include "model_builder.hpp"

namespace hostagent::discovery::detail {
namespace {

PciAddress addr(const char* text) {
  return PciAddress::parse(text).value();
}

numa::PciFunction bridge(const char* address, std::optional<const char*> parent, std::optional<numa::PciePortType> type,
                         int reported_node) {
  numa::PciFunction f;
  f.address = addr(address);
  if (parent) f.parent = addr(*parent);
  f.vendor_id = 0x10b5;
  f.class_code = 0x060400;
  f.port_type = type;
  f.config_space_known = type.has_value();
  f.numa_node_reported = reported_node;
  return f;
}

numa::PciFunction endpoint(const char* address, const char* parent, uint16_t vendor, uint32_t class_code,
                           int reported_node, bool config_known = true) {
  numa::PciFunction f;
  f.address = addr(address);
  f.parent = addr(parent);
  f.vendor_id = vendor;
  f.class_code = class_code;
  f.config_space_known = config_known;
  f.numa_node_reported = reported_node;
  return f;
}

// Root port 00:01.0 -> switch 01:00.0 -> downstream 02:00.0 (GPU 03:00.0), 02:01.0 (NIC 04:00.0).
numa::HostModel switch_host(bool with_port_types, int gpu_node, int nic_node) {
  numa::HostModel model;
  const auto type = [&](numa::PciePortType t) { return with_port_types ? std::optional(t) : std::nullopt; };
  model.pci_devices = {
      bridge("0000:00:01.0", std::nullopt, type(numa::PciePortType::root_port), -1),
      bridge("0000:01:00.0", "0000:00:01.0", type(numa::PciePortType::upstream), -1),
      bridge("0000:02:00.0", "0000:01:00.0", type(numa::PciePortType::downstream), -1),
      bridge("0000:02:01.0", "0000:01:00.0", type(numa::PciePortType::downstream), -1),
      endpoint("0000:03:00.0", "0000:02:00.0", 0x10de, 0x030200, gpu_node, with_port_types),
      endpoint("0000:04:00.0", "0000:02:01.0", 0x15b3, 0x020000, nic_node, with_port_types),
  };
  finish_model(model);
  return model;
}

TEST_CASE("bridges that report numa_node=-1 take the node that every device beneath them names") {
  const auto model = switch_host(true, 1, 1);
  for (const auto& f : model.pci_devices) {
    CAPTURE(f.address.to_string());
    CHECK(f.numa_node == std::optional<int>(1));
  }
  REQUIRE(model.switches.size() == 1);
  CHECK(model.switches[0].numa_node == std::optional<int>(1));
}

TEST_CASE("a bridge over devices on different nodes stays unknown rather than guessing") {
  const auto model = switch_host(true, 0, 1);
  CHECK_FALSE(model.find(addr("0000:01:00.0"))->numa_node.has_value());
  CHECK(model.find(addr("0000:02:00.0"))->numa_node == std::optional<int>(0));
  CHECK(model.find(addr("0000:02:01.0"))->numa_node == std::optional<int>(1));
}

TEST_CASE("roles come from the PCIe port type, and from the tree's shape when config space is unknown") {
  for (const bool with_types : {true, false}) {
    CAPTURE(with_types);
    const auto model = switch_host(with_types, 0, 0);
    CHECK(model.find(addr("0000:00:01.0"))->role == numa::PciRole::root_port);
    CHECK(model.find(addr("0000:01:00.0"))->role == numa::PciRole::switch_upstream);
    CHECK(model.find(addr("0000:02:00.0"))->role == numa::PciRole::switch_downstream);
    CHECK(model.find(addr("0000:03:00.0"))->role == numa::PciRole::gpu);
    CHECK(model.find(addr("0000:04:00.0"))->role == numa::PciRole::nic);
    const auto& sw = model.switches.at(0);
    CHECK(sw.upstream == addr("0000:01:00.0"));
    CHECK(sw.downstream == std::vector<PciAddress>{addr("0000:02:00.0"), addr("0000:02:01.0")});
    CHECK(sw.devices == std::vector<PciAddress>{addr("0000:03:00.0"), addr("0000:04:00.0")});
    CHECK(model.find(addr("0000:03:00.0"))->pcie_switch == addr("0000:01:00.0"));
    CHECK(model.find(addr("0000:03:00.0"))->bridge_chain ==
          std::vector<PciAddress>{addr("0000:02:00.0"), addr("0000:01:00.0"), addr("0000:00:01.0")});
  }
}

TEST_CASE("a bridge below a root port with no bridges beneath it is not a switch") {
  numa::HostModel model;
  model.pci_devices = {bridge("0000:00:1c.0", std::nullopt, std::nullopt, 0),
                       bridge("0000:04:00.0", "0000:00:1c.0", std::nullopt, 0),
                       endpoint("0000:05:00.0", "0000:04:00.0", 0x102b, 0x030000, 0, false)};
  finish_model(model);
  CHECK(model.find(addr("0000:04:00.0"))->role == numa::PciRole::other);
  CHECK(model.switches.empty());
}

TEST_CASE("endpoint roles: NVIDIA display and bridge-other classes, ConnectX only, NVMe by programming interface") {
  const numa::PciFunction root = bridge("0000:00:01.0", std::nullopt, numa::PciePortType::root_port, 0);
  CHECK(classify(endpoint("0000:01:00.0", "0000:00:01.0", 0x10de, 0x030000, 0), &root, false) == numa::PciRole::gpu);
  CHECK(classify(endpoint("0000:01:00.0", "0000:00:01.0", 0x10de, 0x068000, 0), &root, false) ==
        numa::PciRole::nvswitch);
  CHECK(classify(endpoint("0000:01:00.1", "0000:00:01.0", 0x10de, 0x040300, 0), &root, false) == numa::PciRole::other);
  CHECK(classify(endpoint("0000:01:00.0", "0000:00:01.0", 0x15b3, 0x020700, 0), &root, false) == numa::PciRole::nic);
  CHECK(classify(endpoint("0000:01:00.0", "0000:00:01.0", 0x8086, 0x020000, 0), &root, false) == numa::PciRole::other);
  CHECK(classify(endpoint("0000:01:00.0", "0000:00:01.0", 0x144d, 0x010802, 0), &root, false) == numa::PciRole::nvme);
  CHECK(classify(endpoint("0000:01:00.0", "0000:00:01.0", 0x8086, 0x010801, 0), &root, false) == numa::PciRole::other);
  numa::PciFunction dmi = bridge("0000:00:1e.0", std::nullopt, std::nullopt, 0);
  dmi.class_code = 0x060401;  // subtractive decode
  CHECK(classify(dmi, nullptr, true) == numa::PciRole::other);
}

TEST_CASE("IOMMU groups collect their members") {
  numa::HostModel model;
  auto gpu = endpoint("0000:01:00.0", "0000:00:01.0", 0x10de, 0x030000, 0);
  auto audio = endpoint("0000:01:00.1", "0000:00:01.0", 0x10de, 0x040300, 0);
  gpu.iommu_group = 7;
  audio.iommu_group = 7;
  model.pci_devices = {bridge("0000:00:01.0", std::nullopt, numa::PciePortType::root_port, 0), gpu, audio};
  finish_model(model);
  REQUIRE(model.iommu_groups.size() == 1);
  CHECK(model.iommu_groups[0].id == 7);
  CHECK(model.iommu_groups[0].members == std::vector<PciAddress>{gpu.address, audio.address});
}

}  // namespace
}  // namespace hostagent::discovery::detail
