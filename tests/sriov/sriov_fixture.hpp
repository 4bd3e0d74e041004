// Test helper: the vela2 simulated host under a scratch directory with the fake kernel's SR-IOV
// model over it. Its stack 0x15 NIC is PF 0000:19:00.0 (mlx5_core, ens1np0, mlx5_0; 16 VFs
// possible at offset 1, stride 1) with 4 VFs 0000:19:00.1-00.4 bound to mlx5_core.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "fake_kernel.hpp"
#include "fake_sriov.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "test_support.hpp"

namespace hostagent::sriov::fake {

inline const std::filesystem::path& written_vela2(const hostagent::testing::TempDir& dir) {
  const auto status = simhost::write_sysfs_tree(simhost::builtin_host("vela2").value(), dir.path());
  HA_ASSERT(status.ok());
  return dir.path();
}

struct Vela2 {
  explicit Vela2(hostagent::testing::SriovModelOptions options = {})
      : kernel(written_vela2(dir)), sysfs(SysfsRoot::open(dir.path()).value()) {
    hostagent::testing::install_sriov_model(kernel, std::move(options));
  }

  std::filesystem::path host(const std::string& kernel_path) const { return kernel.host_path(kernel_path); }
  // Fixture edits that are not kernel writes (a different stride, a driver link).
  void put(const std::string& kernel_path, const std::string& contents) const {
    std::ofstream(host(kernel_path), std::ios::trunc) << contents;
  }
  std::string get(const std::string& kernel_path) const { return sysfs.read(kernel_path).value(); }

  hostagent::testing::TempDir dir;
  hostagent::testing::FakeKernel kernel;
  SysfsRoot sysfs;
};

inline const std::string kPf = "0000:19:00.0";
inline const std::string kPfDir = "/sys/bus/pci/devices/0000:19:00.0";

}  // namespace hostagent::sriov::fake
