#include <doctest/doctest.h>

#include "hostagent/vfio/group_viability.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::vfio {
namespace {

using numa::PciRole;

TEST_CASE("a GPU whose audio function shares its group: the audio function goes along and blocks while bound") {
  testing::TempDir dir;
  const auto model = testing::discover_simulated("quirks", dir);
  const numa::PciFunction* gpu = nullptr;
  for (const auto& f : model.pci_devices) {
    if (f.role == PciRole::gpu && model.find(numa::PciAddress{f.address.domain, f.address.bus, f.address.device, 1}))
      gpu = &f;
  }
  REQUIRE(gpu != nullptr);
  const auto viability = check_group(model, gpu->address).value();
  CHECK(viability.group == *gpu->iommu_group);
  REQUIRE(viability.companions.size() == 1);
  CHECK(viability.companions[0].function == 1);
  // Both functions are bound to host drivers (nvidia, snd_hda_intel): both must move first.
  CHECK(viability.blockers.size() == 2);
}

TEST_CASE("a GPU alone in its group has no companions, and the group is viable once the GPU itself is bound") {
  testing::TempDir dir;
  const auto model = testing::discover_simulated("vela1", dir);
  for (const auto& f : model.pci_devices) {
    if (f.role != PciRole::gpu) continue;
    const auto viability = check_group(model, f.address).value();
    CHECK(viability.companions.empty());
    CHECK(viability.blockers == std::vector<numa::PciAddress>{f.address});
  }
}

TEST_CASE("an unknown device or an unknown group is an error, never a viable group") {
  numa::HostModel model;
  const auto missing = check_group(model, numa::PciAddress{0, 1, 0, 0});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  numa::PciFunction f;
  f.address = numa::PciAddress{0, 1, 0, 0};
  model.pci_devices.push_back(f);
  const auto unknown = check_group(model, f.address);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("intel_iommu=on") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::vfio
