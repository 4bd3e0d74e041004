// Inside the emulated GPU host: host discovery on a live kernel, and vfio/'s peer-to-peer setting
// (Vela's ACS and ATS values) planned from that model, applied through libpci, checked with raw
// config space reads, and restored.
#include <doctest/doctest.h>

#include <algorithm>

#include "../emulated_host.hpp"
#include "guest_host.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/vfio/config_space_access.hpp"
#include "hostagent/vfio/p2p_settings.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

const numa::HostModel& model() {
  static const numa::HostModel discovered = [] {
    auto found = discovery::discover_from_sysfs("/");
    REQUIRE_MESSAGE(found.ok(), found.error().message);
    return std::move(found).value();
  }();
  return discovered;
}

TEST_CASE(
    "discovery on the live kernel finds the NUMA nodes, the switches, the IOMMU groups and ACS on the root ports") {
  CHECK(model().numa_nodes.size() == static_cast<std::size_t>(host::kNodes));
  CHECK(model().switches.size() == static_cast<std::size_t>(host::kNodes));
  CHECK(!model().iommu_groups.empty());
  for (const auto& edu : pci_functions(host::kEduVendor, host::kEduDevice)) {
    INFO(edu.to_string());
    const auto* f = model().find(edu);
    REQUIRE(f != nullptr);
    CHECK(f->iommu_group == std::optional<int>(iommu_group_of(edu)));
    CHECK(f->pcie_switch.has_value());
    CHECK(f->numa_node.has_value());
  }
  for (const auto& nvme : pci_functions(host::kNvmeVendor, host::kNvmeDevice)) {
    INFO(nvme.to_string());
    const auto* port = model().find(*parent_bridge(nvme));
    REQUIRE(port != nullptr);
    CHECK(port->role == numa::PciRole::root_port);
    REQUIRE(port->acs.has_value());
    const auto* pf = model().find(nvme);
    REQUIRE(pf != nullptr);
    CHECK(pf->sriov.has_value());
  }
}

TEST_CASE(
    "Vela's setting on the ATS endpoint: Direct Translated P2P on the root port above it, ATS on it, then restored") {
  const auto endpoints = pci_functions(host::kAtsEndpointVendor, host::kAtsEndpointDevice);
  REQUIRE(endpoints.size() == 1);
  const PciAddress endpoint = endpoints.front();
  const auto* f = model().find(endpoint);
  REQUIRE(f != nullptr);
  REQUIRE(!f->bridge_chain.empty());
  const PciAddress root_port = f->bridge_chain.back();
  const int acs = *ext_capability(root_port, kAcs);
  const int ats = *ext_capability(endpoint, kAts);
  const uint16_t acs_before = read_config16(root_port, acs + 6);
  const uint16_t ats_before = read_config16(endpoint, ats + 6);

  auto config = vfio::make_libpci_config_space("/");
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  const auto plan = vfio::p2p_needs(model(), {endpoint}, **config);
  REQUIRE_MESSAGE(plan.ok(), plan.error().message);
  // The switch's downstream port has no ACS and its upstream port is no ACS port: two registers.
  REQUIRE(plan->size() == 2);
  CHECK((*plan)[0].device == root_port);
  CHECK((*plan)[0].before == acs_before);
  CHECK((*plan)[0].after == vfio::vela_acs_control(read_config16(root_port, acs + 4), acs_before));
  CHECK(((*plan)[0].after & vfio::kAcsDirectTranslated) != 0);
  CHECK((*plan)[1].device == endpoint);
  CHECK((*plan)[1].after == (ats_before | vfio::kAtsEnable));

  const auto applied = vfio::apply_p2p(**config, *plan);
  REQUIRE_MESSAGE(applied.ok(), applied.error().message);
  CHECK(read_config16(root_port, acs + 6) == (*plan)[0].after);
  CHECK(read_config16(endpoint, ats + 6) == (*plan)[1].after);
  const auto again = vfio::p2p_needs(model(), {endpoint}, **config);
  REQUIRE_MESSAGE(again.ok(), again.error().message);
  for (const auto& need : *again) CHECK(need.before == need.after);  // nothing left to write

  const auto restored = vfio::restore_p2p(**config, *applied);
  CHECK_MESSAGE(restored.ok(), (restored.ok() ? "" : restored.error().message));
  CHECK(read_config16(root_port, acs + 6) == acs_before);
  CHECK(read_config16(endpoint, ats + 6) == ats_before);
}

TEST_CASE("the P2P state report names the ACS bits Linux enabled on the root ports, and ATS off on the endpoint") {
  auto config = vfio::make_libpci_config_space("/");
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  const auto states = vfio::current_state(model(), **config);
  REQUIRE_MESSAGE(states.ok(), states.error().message);
  const auto endpoint = pci_functions(host::kAtsEndpointVendor, host::kAtsEndpointDevice).at(0);
  int root_ports = 0;
  for (const auto& state : *states) {
    INFO(state.device.to_string());
    const auto* f = model().find(state.device);
    REQUIRE(f != nullptr);
    if (f->role == numa::PciRole::root_port && state.acs_control) {
      ++root_ports;
      CHECK(state.acs_enabled == std::vector<std::string>{"SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"});
    }
    if (state.device == endpoint) CHECK(state.ats_enabled == std::optional<bool>(false));
  }
  CHECK(root_ports >= 2 * host::kNodes);
}

}  // namespace
}  // namespace hostagent::testing::guest
