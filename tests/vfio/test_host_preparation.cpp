// bind_all at daemon start on the simulated Vela-2-like host: every GPU and NVSwitch goes to
// vfio-pci, nothing else moves, and a failure midway gives every group back.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>

#include "fake_host.hpp"
#include "hostagent/numa/discovery.hpp"
#include "hostagent/vfio/host_preparation.hpp"

namespace hostagent::vfio {
namespace {

using testing::builtin_spec;
using testing::describe_difference;
using testing::FakeHost;

numa::HostModel discover(const FakeHost& host) {
  auto model = numa::discover_from_sysfs(host.root());
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  return std::move(model).value();
}

std::size_t count_role(const numa::HostModel& model, numa::PciRole role) {
  return static_cast<std::size_t>(std::count_if(model.pci_devices.begin(), model.pci_devices.end(),
                                                [&](const numa::PciFunction& f) { return f.role == role; }));
}

TEST_CASE("bind_all puts every GPU and NVSwitch of vela2 on vfio-pci and release_all restores the tree") {
  FakeHost host(builtin_spec("vela2"));
  const auto model = discover(host);
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto bound = bind_all(binder, model);
  REQUIRE_MESSAGE(bound.ok(), bound.error().message);
  const std::size_t gpus = count_role(model, numa::PciRole::gpu);
  const std::size_t nvswitches = count_role(model, numa::PciRole::nvswitch);
  REQUIRE(gpus > 0);
  REQUIRE(nvswitches > 0);
  CHECK(bound->size() == gpus + nvswitches);  // one group each on this host
  for (const auto& f : model.pci_devices) {
    const std::string driver = host.driver_of(f.address.to_string());
    const bool passthrough = f.role == numa::PciRole::gpu || f.role == numa::PciRole::nvswitch;
    CHECK_MESSAGE((driver == "vfio-pci") == passthrough, f.address.to_string() << " is on " << driver);
    if (passthrough) CHECK(host.exists("/dev/vfio/" + std::to_string(*f.iommu_group)));
  }
  const auto released = release_all(binder, *bound);
  REQUIRE_MESSAGE(released.ok(), released.error().message);
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("bind_all binds only the roles asked for") {
  FakeHost host(builtin_spec("vela2"));
  const auto model = discover(host);
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto bound = bind_all(binder, model, {numa::PciRole::nvswitch});
  REQUIRE_MESSAGE(bound.ok(), bound.error().message);
  CHECK(bound->size() == count_role(model, numa::PciRole::nvswitch));
  for (const auto& f : model.pci_devices) {
    if (f.role == numa::PciRole::gpu) CHECK(host.driver_of(f.address.to_string()) == "nvidia");
  }
}

TEST_CASE("a failure midway through bind_all gives back every group bound before it") {
  FakeHost host(builtin_spec("vela2"));
  const auto model = discover(host);
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto clean = bind_all(binder, model);
  REQUIRE(clean.ok());
  const std::size_t clean_writes = host.kernel().writes().size();
  REQUIRE(release_all(binder, *clean).ok());
  // The first write, one in the middle of a later group, and the very last one.
  for (const std::size_t nth : {std::size_t{1}, clean_writes / 2, clean_writes}) {
    CAPTURE(nth);
    host.kernel().fail_write(".*", EIO, static_cast<int>(nth));
    const auto failed = bind_all(binder, model);
    REQUIRE_FALSE(failed.ok());
    CHECK_MESSAGE(failed.error().message.find("for passthrough") != std::string::npos, failed.error().message);
    CHECK(describe_difference(before, host.snapshot()).empty());
  }
}

}  // namespace
}  // namespace hostagent::vfio
