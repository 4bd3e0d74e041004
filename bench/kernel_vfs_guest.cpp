// The guest half of bench_kernel_vfs: runs inside the emulated GPU host (tests/kernel/emulated_host.hpp,
// booted with 16 VFs per NVMe PF) on Debian's kernel, and times the device code against the raw
// kernel writes it makes, interleaved round by round (the order alternating), medians and p90s:
//  - VF creation: sriov::set_vf_count 0 -> 16 -> 0 on an NVMe PF, against sriov_numvfs 16 then 0;
//  - VF configuration: sriov::configure then sriov::reset of 16 netdevsim VFs over libnl, against
//    one VfNetlink::apply per VF of the same settings (and of the neutral ones reset sends);
//  - vfio: VfioBinder bind_group + release of each of the 16 NVMe VFs, against the bare
//    driver_override/drivers_probe/unbind writes (with and without the reset release adds).
// A doctest program because the harness's /init runs each test case of the guest program in a
// process of its own, its output between markers on ttyS1; the host prints that output.
#include <doctest/doctest.h>
#include <sys/mount.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "../tests/kernel/emulated_host.hpp"
#include "../tests/kernel/guest/guest_host.hpp"
#include "hostagent/sriov/vf_configurator.hpp"
#include "hostagent/sriov/vf_netlink.hpp"
#include "hostagent/sriov/vf_provisioning.hpp"
#include "hostagent/vfio/vfio_binding.hpp"
#include "kernel_vfs_bench.hpp"

namespace hostagent::bench::kernel_vfs {
namespace {

namespace host = testing::emulated_host;
using namespace testing::guest;
using Clock = std::chrono::steady_clock;

constexpr int kVfs = 16;

int rounds() {
  std::ifstream in(kRoundsFile);
  int n = 0;
  return in >> n && n > 0 ? n : kDefaultRounds;
}

// Times fn, which must succeed: a failed step is a broken benchmark, not a slow one.
double timed(const std::function<Status()>& fn, const std::string& what) {
  const auto start = Clock::now();
  const Status status = fn();
  const double ms = ms_since(start);
  REQUIRE_MESSAGE(status.ok(), what << ": " << (status.ok() ? "" : status.error().message));
  return ms;
}

void print_row(const std::string& what, const std::vector<double>& samples, const std::vector<double>* baseline) {
  const Summary s = summarize(samples);
  std::printf("  %-52s median %9.2f ms  p90 %9.2f ms", what.c_str(), s.median_ms, s.p90_ms);
  if (baseline != nullptr) std::printf("  x%.2f", s.median_ms / summarize(*baseline).median_ms);
  std::printf("  (n=%zu)\n", s.n);
}

// A two-step operation's samples: the steps and their sum.
struct Phases {
  std::vector<double> first, second, total;
  void add(double a, double b) {
    first.push_back(a);
    second.push_back(b);
    total.push_back(a + b);
  }
  void clear() { first.clear(), second.clear(), total.clear(); }
};

// One round of each first, unrecorded (the kernel's and the libraries' first-time allocations),
// then `rounds` rounds, the device code first in even ones and the baseline first in odd ones, so
// neither always pays for what the other left behind (a runtime-suspended device, a cold cache).
void interleave(int rounds, const std::function<void()>& library, const std::function<void()>& baseline,
                const std::function<void()>& clear) {
  library();
  baseline();
  clear();
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      library();
      baseline();
    } else {
      baseline();
      library();
    }
  }
}

void write_file(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.flush();
  REQUIRE_MESSAGE(out.good(), "cannot write '" << value << "' to " << path);
}

TEST_CASE("calibration") {
  const Calibration c = calibrate();
  std::printf("%scpu_ms=%.3f syscall_ms=%.3f\n", kCalibrationPrefix, c.cpu_ms, c.syscall_ms);
}

PciAddress nvme_pf() {
  const auto nvmes = pci_functions(host::kNvmeVendor, host::kNvmeDevice);
  REQUIRE(!nvmes.empty());
  const PciAddress pf = nvmes.front();
  const int total = static_cast<int>(sysfs().read_int(pci_path(pf, "sriov_totalvfs")).value());
  REQUIRE_MESSAGE(total >= kVfs, pf.to_string() << " offers " << total << " VFs (QEMU's sriov_max_vfs), not " << kVfs);
  REQUIRE(driver_of(pf) == std::optional<std::string>("nvme"));
  // QEMU keeps an NVMe VF's controller offline until the PF gives it resources, so nvme's probe of
  // a VF would wait for it (tests/kernel/guest/test_vfio_library.cpp): VFs for VMs stay unprobed.
  require_ok(writer().write(pci_path(pf, "sriov_drivers_autoprobe"), "0"), "sriov_drivers_autoprobe");
  return pf;
}

TEST_CASE("VF creation: set_vf_count 0 to 16 to 0 on an NVMe PF, against the bare sriov_numvfs writes") {
  const PciAddress pf = nvme_pf();
  const std::string numvfs = pci_path(pf, "sriov_numvfs");
  const auto raw = make_sysfs_writer("/");
  Phases lib, base;
  const auto library_round = [&] {
    const double up = timed([&] { return sriov::set_vf_count(sysfs(), writer(), pf, kVfs); }, "set_vf_count 16");
    REQUIRE(sriov::live_vfs(sysfs(), pf).value().size() == kVfs);
    lib.add(up, timed([&] { return sriov::set_vf_count(sysfs(), writer(), pf, 0); }, "set_vf_count 0"));
  };
  const auto raw_round = [&] {
    const double up = timed([&] { return raw->write(numvfs, std::to_string(kVfs)); }, "sriov_numvfs 16");
    REQUIRE(sriov::live_vfs(sysfs(), pf).value().size() == kVfs);
    base.add(up, timed([&] { return raw->write(numvfs, "0"); }, "sriov_numvfs 0"));
  };
  const int n = rounds();
  interleave(n, library_round, raw_round, [&] { lib.clear(), base.clear(); });
  CHECK(sysfs().read_int(numvfs).value() == 0);
  std::printf("VF creation, %s (nvme, %d VFs), %d rounds:\n", pf.to_string().c_str(), kVfs, n);
  print_row("baseline: write sriov_numvfs 16", base.first, nullptr);
  print_row("baseline: write sriov_numvfs 0", base.second, nullptr);
  print_row("baseline: both", base.total, nullptr);
  print_row("set_vf_count(16)", lib.first, &base.first);
  print_row("set_vf_count(0)", lib.second, &base.second);
  print_row("both", lib.total, &base.total);
}

// VF i's settings: every field configure knows, distinct per VF.
sriov::VfSettings wanted_for(int vf) {
  sriov::VfSettings s;
  char mac[24];
  std::snprintf(mac, sizeof mac, "52:54:00:6b:76:%02x", vf);
  s.mac = mac;
  s.vlan = 100 + vf;
  s.qos = vf % 8;
  s.trust = true;
  s.spoofchk = false;
  s.link_state = sriov::LinkState::enable;
  s.min_tx_rate_mbps = 5;
  s.max_tx_rate_mbps = 200;
  return s;
}

// netdevsim offers NSIM_BUS_DEV_MAX_VFS (4) VFs per device; its debugfs max_vfs raises that while
// no VF exists (drivers/net/netdevsim/dev.c nsim_bus_dev_max_vfs_write).
void allow_netdevsim_vfs(int count) {
  if (mount("debugfs", "/sys/kernel/debug", "debugfs", 0, nullptr) != 0 && errno != EBUSY) {
    FAIL("mount debugfs on /sys/kernel/debug: " << std::strerror(errno));
  }
  write_file("/sys/kernel/debug/netdevsim/netdevsim" + std::to_string(host::kNetdevsimId) + "/max_vfs",
             std::to_string(count));
}

TEST_CASE("VF configuration: configure and reset of 16 netdevsim VFs, against one apply per VF") {
  const std::string pf = netdevsim_netdev(host::kNetdevsimId);
  REQUIRE(!pf.empty());
  const std::string numvfs =
      "/sys/bus/netdevsim/devices/netdevsim" + std::to_string(host::kNetdevsimId) + "/sriov_numvfs";
  allow_netdevsim_vfs(kVfs);
  require_ok(writer().write(numvfs, std::to_string(kVfs)), "netdevsim sriov_numvfs 16");
  const auto netlink = sriov::make_libnl_vf_netlink();

  // What reset sends each VF, found once: the baseline applies exactly those settings.
  std::vector<sriov::VfSettings> wanted, neutral;
  for (int vf = 0; vf < kVfs; ++vf) {
    wanted.push_back(wanted_for(vf));
    require_ok(netlink->apply(pf, vf, wanted.back()), "apply");
    neutral.push_back(sriov::neutral_settings(netlink->read(pf, vf).value(), wanted.back()));
    require_ok(netlink->apply(pf, vf, neutral.back()), "apply neutral");
  }

  Phases lib, base;
  std::vector<double> reads;  // what configure and reset add to each apply: a read takes this long
  const auto library_round = [&] {
    std::vector<sriov::VfConfigRecord> records;
    auto start = Clock::now();
    for (int vf = 0; vf < kVfs; ++vf) {
      auto record = sriov::configure(*netlink, pf, vf, wanted[vf]);
      REQUIRE_MESSAGE(record.ok(), record.error().message);
      records.push_back(std::move(*record));
    }
    const double set = ms_since(start);
    CHECK(netlink->read(pf, kVfs - 1).value().vlan == 100 + kVfs - 1);
    start = Clock::now();
    for (const auto& record : records) require_ok(sriov::reset(*netlink, record), "reset");
    lib.add(set, ms_since(start));
  };
  const auto raw_round = [&] {
    auto start = Clock::now();
    for (int vf = 0; vf < kVfs; ++vf) require_ok(netlink->apply(pf, vf, wanted[vf]), "apply");
    const double set = ms_since(start);
    CHECK(netlink->read(pf, kVfs - 1).value().vlan == 100 + kVfs - 1);
    start = Clock::now();
    for (int vf = 0; vf < kVfs; ++vf) require_ok(netlink->apply(pf, vf, neutral[vf]), "apply neutral");
    base.add(set, ms_since(start));
    start = Clock::now();
    for (int vf = 0; vf < kVfs; ++vf) REQUIRE(netlink->read(pf, vf).ok());
    reads.push_back(ms_since(start));
  };
  const int n = rounds();
  interleave(n, library_round, raw_round, [&] { lib.clear(), base.clear(), reads.clear(); });
  CHECK(netlink->read(pf, 0).value().mac == "00:00:00:00:00:00");
  require_ok(writer().write(numvfs, "0"), "netdevsim sriov_numvfs 0");
  std::printf("VF configuration, %s (netdevsim, %d VFs, every field set), %d rounds:\n", pf.c_str(), kVfs, n);
  print_row("baseline: apply x16 (the VM's settings)", base.first, nullptr);
  print_row("baseline: apply x16 (the neutral settings)", base.second, nullptr);
  print_row("baseline: both", base.total, nullptr);
  print_row("(for scale: read x16, each the PF's link, all VFs)", reads, nullptr);
  print_row("configure x16", lib.first, &base.first);
  print_row("reset x16", lib.second, &base.second);
  print_row("both", lib.total, &base.total);
  print_row("both, against the VM's settings' applies alone", lib.total, &base.first);
}

TEST_CASE("vfio: bind_group and release of each of 16 NVMe VFs, against the bare driver writes") {
  const PciAddress pf = nvme_pf();
  require_ok(sriov::set_vf_count(sysfs(), writer(), pf, kVfs), "set_vf_count 16");
  const auto vfs = sriov::live_vfs(sysfs(), pf).value();
  REQUIRE(vfs.size() == kVfs);
  std::size_t largest_group = 0;
  for (const auto& vf : vfs) largest_group = std::max(largest_group, group_members(iommu_group_of(vf.address)).size());
  INFO("a VF shares its IOMMU group with " << largest_group - 1 << " other functions");
  REQUIRE(largest_group == 1);

  vfio::VfioBinder binder(sysfs(), writer());
  const auto raw = make_sysfs_writer("/");
  const auto raw_bind = [&](const PciAddress& vf) -> Status {
    HA_TRY_STATUS(raw->write(pci_path(vf, "driver_override"), "vfio-pci"));
    return raw->write("/sys/bus/pci/drivers_probe", vf.to_string());
  };
  // As release does: the reset (where the VF has a method) while vfio-pci still holds it.
  const auto methods = sysfs().read(pci_path(vfs.front().address, "reset_method"));
  const std::string reset_methods = methods.ok() ? *methods : "";
  const bool resettable = !reset_methods.empty();
  const auto raw_release = [&](const PciAddress& vf, bool reset) -> Status {
    if (reset && resettable) HA_TRY_STATUS(raw->write(pci_path(vf, "reset"), "1"));
    HA_TRY_STATUS(raw->write("/sys/bus/pci/drivers/vfio-pci/unbind", vf.to_string()));
    return raw->write(pci_path(vf, "driver_override"), "\n");
  };
  Phases lib;
  std::vector<double> raw_bind_ms, raw_release_ms, raw_release_reset_ms;
  const auto library_round = [&] {
    std::vector<vfio::GroupBinding> bindings;
    auto start = Clock::now();
    for (const auto& vf : vfs) {
      auto binding = binder.bind_group(vf.address);
      REQUIRE_MESSAGE(binding.ok(), binding.error().message);
      bindings.push_back(std::move(*binding));
    }
    const double bind = ms_since(start);
    CHECK(driver_of(vfs.back().address) == std::optional<std::string>("vfio-pci"));
    start = Clock::now();
    for (const auto& binding : bindings) require_ok(binder.release(binding), "release");
    lib.add(bind, ms_since(start));
  };
  // The bare writes: bind (timed), release without the reset (timed); bind again, release with it.
  const auto raw_round = [&] {
    for (const bool reset : {false, true}) {
      auto start = Clock::now();
      for (const auto& vf : vfs) require_ok(raw_bind(vf.address), "bind");
      if (!reset) raw_bind_ms.push_back(ms_since(start));
      CHECK(driver_of(vfs.back().address) == std::optional<std::string>("vfio-pci"));
      start = Clock::now();
      for (const auto& vf : vfs) require_ok(raw_release(vf.address, reset), "release");
      (reset ? raw_release_reset_ms : raw_release_ms).push_back(ms_since(start));
    }
  };
  const int n = rounds();
  interleave(n, library_round, raw_round, [&] {
    lib.clear();
    raw_bind_ms.clear(), raw_release_ms.clear(), raw_release_reset_ms.clear();
  });
  CHECK_FALSE(driver_of(vfs.front().address).has_value());
  require_ok(sriov::set_vf_count(sysfs(), writer(), pf, 0), "set_vf_count 0");
  std::printf("vfio binding, the %d VFs of %s (a group each, reset_method '%s'), %d rounds:\n", kVfs,
              pf.to_string().c_str(), reset_methods.c_str(), n);
  print_row("baseline: driver_override + drivers_probe x16", raw_bind_ms, nullptr);
  print_row("baseline: unbind + driver_override x16", raw_release_ms, nullptr);
  print_row("baseline: unbind + reset + driver_override x16", raw_release_reset_ms, nullptr);
  print_row("bind_group x16", lib.first, &raw_bind_ms);
  print_row("release x16 (with reset)", lib.second, &raw_release_reset_ms);
  print_row("release x16, against the writes without reset", lib.second, &raw_release_ms);
}

}  // namespace
}  // namespace hostagent::bench::kernel_vfs
