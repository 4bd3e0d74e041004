#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "hostagent/api/host_json.hpp"

namespace hostagent::api {
namespace {

namespace json = boost::json;

numa::HostModel small_model() {
  numa::HostModel model;
  model.source = "test";
  numa::NumaNode node;
  node.id = 0;
  node.cpus = {0, 1};
  node.memory_bytes = 1ULL << 30;
  node.hugepages = {numa::HugepagePool{1ULL << 30, 4, std::nullopt}};
  node.distances = {{0, 10}};
  model.numa_nodes = {node};
  numa::PciFunction gpu;
  gpu.address = numa::PciAddress{0, 0x1b, 0, 0};
  gpu.vendor_id = 0x10de;
  gpu.device_id = 0x2330;
  gpu.class_code = 0x030200;
  gpu.role = numa::PciRole::gpu;
  gpu.numa_node = 0;
  gpu.acs = numa::AcsState{0x5f, 0x1d};
  model.pci_devices = {gpu};
  return model;
}

TEST_CASE("topology JSON uses the documented names, and unknown values are null") {
  const auto value = to_json(small_model());
  const auto& root = value.as_object();
  CHECK(root.at("format_version").as_int64() == kTopologyFormatVersion);
  for (const char* key : {"numa_nodes", "cpus", "pci_devices", "switches", "iommu_groups"}) {
    CAPTURE(key);
    CHECK(root.at(key).is_array());
  }
  const auto& node = root.at("numa_nodes").as_array().at(0).as_object();
  CHECK(node.at("id").as_int64() == 0);
  CHECK(node.at("cpus").as_array().size() == 2);
  CHECK(node.at("memory_bytes").to_number<uint64_t>() == 1ULL << 30);
  CHECK(node.at("memory_free_bytes").is_null());
  CHECK(node.at("hugepages").as_array().at(0).as_object().at("free").is_null());
  CHECK(node.at("distances").as_object().at("0").as_int64() == 10);

  const auto& gpu = root.at("pci_devices").as_array().at(0).as_object();
  CHECK(gpu.at("address").as_string() == "0000:1b:00.0");
  CHECK(gpu.at("vendor_id").as_string() == "0x10de");
  CHECK(gpu.at("device_id").as_string() == "0x2330");
  CHECK(gpu.at("class").as_string() == "0x030200");
  CHECK(gpu.at("role").as_string() == "gpu");
  CHECK(gpu.at("numa_node").as_int64() == 0);
  for (const char* unknown : {"iommu_group", "driver", "switch", "parent", "sriov", "physfn", "ats", "port_type"}) {
    CAPTURE(unknown);
    CHECK(gpu.at(unknown).is_null());
  }
  CHECK(gpu.at("acs").as_object().at("control").as_string() == "0x001d");
}

TEST_CASE("pretty JSON parses back to the same value") {
  const auto value = to_json(small_model());
  const auto text = to_pretty_json(value);
  CHECK(json::parse(text) == value);
  CHECK(text.back() == '\n');
}

}  // namespace
}  // namespace hostagent::api
