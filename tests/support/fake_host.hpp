// Test helper for the vfio suites: a simulated host's tree under a scratch directory, with the
// fake kernel's PCI driver core over it, and the readings the tests compare.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "fake_kernel.hpp"
#include "fake_pci_drivers.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "test_support.hpp"

namespace hostagent::testing {

inline simhost::HostSpec builtin_spec(const std::string& name) {
  auto spec = simhost::builtin_host(name);
  REQUIRE_MESSAGE(spec.ok(), spec.error().message);
  return std::move(spec).value();
}

inline simhost::SimFunction& function_of(simhost::HostSpec& spec, const std::string& address) {
  for (auto& f : spec.functions) {
    if (f.address == address) return f;
  }
  FAIL("no function " << address << " in " << spec.name);
  throw std::logic_error("unreachable");
}

class FakeHost {
 public:
  // before_model registers models that take precedence over the driver core's (the first
  // registered match wins): a kernel that behaves differently on one attribute.
  explicit FakeHost(const simhost::HostSpec& spec, const std::function<void(FakeKernel&)>& before_model = {})
      : kernel_(written(spec, dir_)) {
    if (before_model) before_model(kernel_);
    drivers_ = install_pci_driver_model(kernel_);
  }

  const std::filesystem::path& root() const { return dir_.path(); }
  FakeKernel& kernel() { return kernel_; }
  FakePciDrivers& drivers() { return *drivers_; }
  SysfsRoot sysfs() const { return SysfsRoot::open(root()).value(); }
  std::map<std::string, std::string> snapshot() const { return snapshot_tree(root()); }

  std::filesystem::path host(const std::string& kernel_path) const {
    return root() / std::filesystem::path(kernel_path).relative_path();
  }
  bool exists(const std::string& kernel_path) const {
    std::error_code ec;
    return std::filesystem::exists(std::filesystem::symlink_status(host(kernel_path), ec));
  }
  std::string read(const std::string& kernel_path) const { return read_text_file(host(kernel_path)); }
  // An empty attribute file, with its directories: a driver the fixture did not load, say.
  void make_file(const std::string& kernel_path) const {
    std::filesystem::create_directories(host(kernel_path).parent_path());
    std::ofstream created(host(kernel_path));
  }
  // The name of the driver bound to bdf, "" when none.
  std::string driver_of(const std::string& bdf) const {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(host("/sys/bus/pci/devices/" + bdf + "/driver"), ec);
    return ec ? "" : target.filename().string();
  }
  std::string group_of(const std::string& bdf) const {
    return std::filesystem::read_symlink(host("/sys/bus/pci/devices/" + bdf + "/iommu_group")).filename().string();
  }

 private:
  static std::filesystem::path written(const simhost::HostSpec& spec, const TempDir& dir) {
    const auto status = simhost::write_sysfs_tree(spec, dir.path());
    REQUIRE_MESSAGE(status.ok(), status.error().message);
    return dir.path();
  }

  TempDir dir_;
  FakeKernel kernel_;
  std::shared_ptr<FakePciDrivers> drivers_;
};

}  // namespace hostagent::testing
