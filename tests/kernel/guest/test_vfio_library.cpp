// Inside the emulated GPU host: vfio/'s VfioBinder and sriov/'s VF provisioning against Debian's
// kernel with a real IOMMU, where the fake kernel of the unit tests only models what these writes
// do. The same devices as the raw checks beside it (test_vfio_binding.cpp, test_sr_iov.cpp).
#include <doctest/doctest.h>

#include "../emulated_host.hpp"
#include "guest_host.hpp"
#include "hostagent/sriov/vf_provisioning.hpp"
#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

TEST_CASE("VfioBinder binds an edu's group with its switch port left on pcieport, and release leaves it unbound") {
  const auto edus = pci_functions(host::kEduVendor, host::kEduDevice);
  REQUIRE(!edus.empty());
  const PciAddress edu = edus.back();
  const int group = iommu_group_of(edu);
  REQUIRE_FALSE(driver_of(edu).has_value());
  vfio::VfioBinder binder(sysfs(), writer());

  const auto binding = binder.bind_group(edu);
  REQUIRE_MESSAGE(binding.ok(), binding.error().message);
  CHECK(binding->group == group);
  REQUIRE(binding->functions.size() == 1);  // the bridge stays aside
  CHECK(binding->functions[0].address == edu);
  CHECK(binding->functions[0].original_driver.empty());
  CHECK(driver_of(edu) == std::optional<std::string>("vfio-pci"));
  CHECK(driver_of(*parent_bridge(edu)) == std::optional<std::string>("pcieport"));
  CHECK(sysfs().exists(vfio_node(group)));
  const auto again = binder.bind_group(edu);
  REQUIRE_MESSAGE(again.ok(), again.error().message);
  CHECK(driver_of(edu) == std::optional<std::string>("vfio-pci"));

  const auto released = binder.release(*binding);
  CHECK_MESSAGE(released.ok(), (released.ok() ? "" : released.error().message));
  CHECK_FALSE(driver_of(edu).has_value());
  CHECK(sysfs().read(pci_path(edu, "driver_override")).value() == "(null)");
}

TEST_CASE("VfioBinder moves the nvme PF from nvme to vfio-pci, and release gives it back to nvme") {
  const auto nvmes = pci_functions(host::kNvmeVendor, host::kNvmeDevice);
  REQUIRE(nvmes.size() >= 2);
  const PciAddress pf = nvmes.back();
  REQUIRE(driver_of(pf) == std::optional<std::string>("nvme"));
  vfio::VfioBinder binder(sysfs(), writer());

  const auto binding = binder.bind_group(pf);
  REQUIRE_MESSAGE(binding.ok(), binding.error().message);
  REQUIRE(binding->functions.size() == 1);
  CHECK(binding->functions[0].original_driver == "nvme");
  CHECK(driver_of(pf) == std::optional<std::string>("vfio-pci"));
  CHECK(sysfs().exists(vfio_node(binding->group)));

  const auto released = binder.release(*binding);
  CHECK_MESSAGE(released.ok(), (released.ok() ? "" : released.error().message));
  CHECK(wait_until([&] { return driver_of(pf) == std::optional<std::string>("nvme"); }));
}

TEST_CASE("VfioBinder refuses the ICH9 group while lpc_ich holds its LPC bridge, naming it, and writes nothing") {
  const auto lpc = PciAddress::parse("0000:00:1f.0").value();
  const auto smbus = PciAddress::parse("0000:00:1f.3").value();
  REQUIRE(driver_of(lpc) == std::optional<std::string>("lpc_ich"));
  vfio::VfioBinder binder(sysfs(), writer());

  const auto refused = binder.bind_group(smbus);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK(refused.error().message.find("0000:00:1f.0") != std::string::npos);
  CHECK(refused.error().message.find("lpc_ich") != std::string::npos);
  CHECK(driver_of(lpc) == std::optional<std::string>("lpc_ich"));
  CHECK_FALSE(driver_of(smbus).has_value());
  CHECK(sysfs().read(pci_path(smbus, "driver_override")).value() == "(null)");
}

TEST_CASE("set_vf_count makes the nvme PF's VFs, refuses to change them while one is on vfio-pci, and removes them") {
  const auto nvmes = pci_functions(host::kNvmeVendor, host::kNvmeDevice);
  REQUIRE(!nvmes.empty());
  const PciAddress pf = nvmes.front();
  // QEMU keeps an NVMe VF's controller offline until the PF gives it resources, so nvme's probe of
  // a VF would wait for it: VFs for VMs are not probed by host drivers.
  require_ok(writer().write(pci_path(pf, "sriov_drivers_autoprobe"), "0"), "sriov_drivers_autoprobe");

  const auto made = sriov::set_vf_count(sysfs(), writer(), pf, 2);
  REQUIRE_MESSAGE(made.ok(), made.error().message);
  const auto vfs = sriov::live_vfs(sysfs(), pf).value();
  REQUIRE(vfs.size() == 2);
  CHECK(sriov::set_vf_count(sysfs(), writer(), pf, 2).ok());  // the same count writes nothing

  vfio::VfioBinder binder(sysfs(), writer());
  const auto binding = binder.bind_group(vfs[0].address);
  REQUIRE_MESSAGE(binding.ok(), binding.error().message);
  const auto refused = sriov::set_vf_count(sysfs(), writer(), pf, 1);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK(refused.error().message.find(vfs[0].address.to_string()) != std::string::npos);
  CHECK(sriov::live_vfs(sysfs(), pf).value().size() == 2);

  CHECK(binder.release(*binding).ok());
  CHECK(sriov::set_vf_count(sysfs(), writer(), pf, 0).ok());
  CHECK(sriov::live_vfs(sysfs(), pf).value().empty());
  require_ok(writer().write(pci_path(pf, "sriov_drivers_autoprobe"), "1"), "sriov_drivers_autoprobe");
}

}  // namespace
}  // namespace hostagent::testing::guest
