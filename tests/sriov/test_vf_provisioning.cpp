// set_vf_count against the fake kernel: every path, and a failure injected at each write.
#include <doctest/doctest.h>

#include <cerrno>

#include "hostagent/sriov/vf_provisioning.hpp"
#include "sriov_fixture.hpp"

namespace hostagent::sriov {
namespace {

namespace fs = std::filesystem;
using fake::kPf;
using fake::kPfDir;
using fake::Vela2;
using hostagent::testing::describe_difference;
using hostagent::testing::snapshot_tree;

const numa::PciAddress kPfAddress = numa::PciAddress::parse(kPf).value();

int numvfs(const Vela2& host) {
  return static_cast<int>(host.sysfs.read_int(kPfDir + "/sriov_numvfs").value());
}

// The VFs as the model makes them (the fixture's own also carry netdevs, which the model's probe
// does not create), so that restoring a count can be compared with a snapshot.
void remake(Vela2& host, int count) {
  REQUIRE(set_vf_count(host.sysfs, host.kernel, kPfAddress, 0).ok());
  REQUIRE(set_vf_count(host.sysfs, host.kernel, kPfAddress, count).ok());
}

void bind_to_vfio(const Vela2& host, const std::string& vf) {
  const std::string dir = "/sys/bus/pci/devices/" + vf;
  fs::remove(host.host("/sys/bus/pci/drivers/mlx5_core/" + vf));
  fs::remove(host.host(dir + "/driver"));
  fs::create_directories(host.host("/sys/bus/pci/drivers/vfio-pci"));
  const fs::path device = fs::canonical(host.host(dir));
  fs::create_directory_symlink(fs::relative(host.host("/sys/bus/pci/drivers/vfio-pci"), device), device / "driver");
}

TEST_CASE("live_vfs lists a PF's VFs in virtfn order with their drivers") {
  Vela2 host;
  const auto vfs = live_vfs(host.sysfs, kPfAddress);
  REQUIRE(vfs.ok());
  REQUIRE(vfs->size() == 4);
  for (int n = 0; n < 4; ++n) {
    const auto& vf = (*vfs)[static_cast<std::size_t>(n)];
    CHECK(vf.index == n);
    CHECK(vf.address.to_string() == "0000:19:00." + std::to_string(n + 1));
    CHECK(vf.driver == std::optional<std::string>("mlx5_core"));
  }
  CHECK(live_vfs(host.sysfs, numa::PciAddress::parse("0000:18:00.0").value())->empty());  // the H100
  CHECK(live_vfs(host.sysfs, numa::PciAddress::parse("0000:ff:1f.7").value()).error().code == ErrorCode::not_found);
}

TEST_CASE("set_vf_count with the current count writes nothing") {
  Vela2 host;
  const auto before = snapshot_tree(host.dir.path());
  REQUIRE(set_vf_count(host.sysfs, host.kernel, kPfAddress, 4).ok());
  CHECK(host.kernel.writes().empty());
  CHECK(snapshot_tree(host.dir.path()) == before);
}

TEST_CASE("set_vf_count goes through 0 to change a non-zero count") {
  Vela2 host;
  REQUIRE(set_vf_count(host.sysfs, host.kernel, kPfAddress, 8).ok());
  const std::vector<std::pair<std::string, std::string>> expected{{kPfDir + "/sriov_numvfs", "0\n"},
                                                                  {kPfDir + "/sriov_numvfs", "8\n"}};
  CHECK(host.kernel.writes() == expected);
  CHECK(numvfs(host) == 8);
  const auto vfs = live_vfs(host.sysfs, kPfAddress).value();
  REQUIRE(vfs.size() == 8);
  CHECK(vfs.back().address.to_string() == "0000:19:01.0");  // routing ID 0x1900 + 1 + 7
}

TEST_CASE("set_vf_count removes all VFs and creates them from 0 with one write each") {
  Vela2 host;
  REQUIRE(set_vf_count(host.sysfs, host.kernel, kPfAddress, 0).ok());
  CHECK(host.kernel.writes().size() == 1);
  CHECK(numvfs(host) == 0);
  CHECK(live_vfs(host.sysfs, kPfAddress)->empty());
  REQUIRE(set_vf_count(host.sysfs, host.kernel, kPfAddress, 16).ok());
  CHECK(host.kernel.writes().size() == 2);
  CHECK(live_vfs(host.sysfs, kPfAddress)->size() == 16);
}

TEST_CASE("set_vf_count refuses to remove VFs bound to vfio-pci and names them") {
  Vela2 host;
  bind_to_vfio(host, "0000:19:00.2");
  bind_to_vfio(host, "0000:19:00.4");
  const auto before = snapshot_tree(host.dir.path());
  for (const int count : {0, 2, 8}) {
    CAPTURE(count);
    const auto result = set_vf_count(host.sysfs, host.kernel, kPfAddress, count);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::conflict);
    CHECK(result.error().message.find("0000:19:00.2 (virtfn1)") != std::string::npos);
    CHECK(result.error().message.find("0000:19:00.4 (virtfn3)") != std::string::npos);
    CHECK(result.error().message.find("0000:19:00.3") == std::string::npos);
  }
  CHECK(host.kernel.writes().empty());
  CHECK(snapshot_tree(host.dir.path()) == before);
}

TEST_CASE("set_vf_count rejects counts past sriov_totalvfs, functions without SR-IOV and absent devices") {
  Vela2 host;
  const auto before = snapshot_tree(host.dir.path());
  for (const int count : {17, -1}) {
    const auto result = set_vf_count(host.sysfs, host.kernel, kPfAddress, count);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::invalid_argument);
    CHECK(result.error().message.find("sriov_totalvfs is 16") != std::string::npos);
  }
  const auto gpu = set_vf_count(host.sysfs, host.kernel, numa::PciAddress::parse("0000:18:00.0").value(), 1);
  REQUIRE_FALSE(gpu.ok());
  CHECK(gpu.error().code == ErrorCode::invalid_argument);
  CHECK(gpu.error().message.find("0000:18:00.0 is not an SR-IOV physical function") != std::string::npos);
  const auto absent = set_vf_count(host.sysfs, host.kernel, numa::PciAddress::parse("0000:ff:1f.7").value(), 1);
  REQUIRE_FALSE(absent.ok());
  CHECK(absent.error().code == ErrorCode::not_found);
  CHECK(host.kernel.writes().empty());
  CHECK(snapshot_tree(host.dir.path()) == before);
}

TEST_CASE("set_vf_count on a PF without a driver says to bind it") {
  Vela2 host;
  fs::remove(host.host(kPfDir + "/driver"));
  const auto result = set_vf_count(host.sysfs, host.kernel, kPfAddress, 2);
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().message.find("0000:19:00.0 has no driver bound") != std::string::npos);
  CHECK(host.kernel.writes().empty());
}

struct Change {
  int from;
  int to;
  int writes;  // that a successful change makes
};

TEST_CASE("a failure at each sriov_numvfs write leaves the tree as it was") {
  for (const Change change : {Change{4, 0, 1}, Change{4, 8, 2}, Change{0, 4, 1}, Change{2, 1, 2}}) {
    for (int nth = 1; nth <= change.writes; ++nth) {
      CAPTURE(change.from);
      CAPTURE(change.to);
      CAPTURE(nth);
      Vela2 host;
      remake(host, change.from);
      const auto before = snapshot_tree(host.dir.path());
      host.kernel.fail_write(".*/sriov_numvfs", EIO, nth);
      const auto result = set_vf_count(host.sysfs, host.kernel, kPfAddress, change.to);
      REQUIRE_FALSE(result.ok());
      CHECK(host.kernel.faults_fired() == 1);
      CHECK(result.error().message.find(kPf) != std::string::npos);
      CHECK(result.error().message.find(std::to_string(change.to) + " VFs") != std::string::npos);
      if (nth == 2) CHECK(result.error().message.find("restored the previous") != std::string::npos);
      const auto after = snapshot_tree(host.dir.path());
      CHECK_MESSAGE(after == before, describe_difference(before, after));
    }
  }
}

TEST_CASE("when restoring the previous count fails too, the error says both") {
  Vela2 host;
  remake(host, 4);
  // The later fault first: FakeKernel stops looking at faults once one fires on a write.
  host.kernel.fail_write(".*/sriov_numvfs", ENOMEM, 3);
  host.kernel.fail_write(".*/sriov_numvfs", EIO, 2);
  const auto result = set_vf_count(host.sysfs, host.kernel, kPfAddress, 8);
  REQUIRE_FALSE(result.ok());
  CHECK(host.kernel.faults_fired() == 2);
  CHECK(result.error().message.find("restoring the previous 4 VFs failed too") != std::string::npos);
  CHECK(numvfs(host) == 0);  // what the kernel has: the VFs are gone and could not be brought back
}

TEST_CASE("a PF driver that enables fewer VFs than asked is undone back to the previous count") {
  for (const int from : {0, 1}) {
    CAPTURE(from);
    Vela2 host({{}, {{kPf, 2}}});
    remake(host, from);
    const auto before = snapshot_tree(host.dir.path());
    const auto result = set_vf_count(host.sysfs, host.kernel, kPfAddress, 4);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::io_error);
    CHECK(result.error().message.find("the PF reports 2 VFs") != std::string::npos);
    const auto after = snapshot_tree(host.dir.path());
    CHECK_MESSAGE(after == before, describe_difference(before, after));
  }
}

}  // namespace
}  // namespace hostagent::sriov
