// Inside the emulated GPU host, end to end: hostagentd with its own device preparation, against the
// libvirtd that /init started in this machine's root (harness/host_root.cpp) with QEMU (TCG), driven
// by hostagentctl as an operator would. What it did is read back from the kernel and from libvirt.
// The cases share the emulated host and run in this order; each starts and stops its own daemon on a
// state directory of its own.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>

#include "../guest/guest_host.hpp"
#include "e2e_host.hpp"

namespace hostagent::testing::e2e {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStartTimeout = std::chrono::seconds(120);

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

TEST_CASE("1 hostagentd prepares the host at start: VFs created unprobed, the GPU stand-ins on vfio-pci") {
  const auto devices = emulated_devices();
  REQUIRE(devices.nvme_pfs.size() == 2);
  REQUIRE_FALSE(devices.gpus.empty());
  TempDir dir;
  Daemon daemon(dir.path());
  const auto start = Clock::now();
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  MESSAGE("hostagentd answered " << seconds_since(start) << " s after it started");

  for (const auto& pf : devices.nvme_pfs) {
    INFO("PF " << pf.to_string());
    CHECK(guest::sysfs().read_int(guest::pci_path(pf, "sriov_numvfs")).value() == kVfsPerPf);
    CHECK(guest::sysfs().read(guest::pci_path(pf, "sriov_drivers_autoprobe")).value() == "0");
    CHECK(guest::driver_of(pf) == std::optional<std::string>("nvme"));
    for (const auto& vf : virtfns(pf)) check_vf_idle(vf);
  }
  for (const auto& gpu : devices.gpus) {
    INFO("GPU stand-in " << gpu.to_string());
    CHECK(guest::driver_of(gpu) == std::optional<std::string>("vfio-pci"));
    CHECK(guest::sysfs().exists("/dev/vfio/" + std::to_string(guest::iommu_group_of(gpu))));
  }
  CHECK(daemon.has_record("@host"));
  // The API lists the VFs as NVMe devices a VM can take.
  const auto listed = daemon.ctl({"devices", "--role", "nvme", "--free"});
  CHECK(listed.exit_code == 0);
  for (const auto& vf : all_vfs())
    CHECK_MESSAGE(listed.output.find(vf.to_string()) != std::string::npos, listed.output);
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("2 a VM whose passthrough device is an NVMe VF runs, and deleting it gives the VF back") {
  TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const std::string name = "e2e-vf";

  auto start = Clock::now();
  const auto created = daemon.ctl({"vm", "create", "--template", kVfTemplate, "--name", name});
  const double create_s = seconds_since(start);
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(name));
  const auto domain = libvirt_domain(name);
  REQUIRE(domain.exists);
  CHECK_MESSAGE(domain.running, libvirt_logs(name));
  const PciAddress vf = check_vm_holds_a_vf(domain);
  CHECK(daemon.has_record(name));

  start = Clock::now();
  const auto deleted = daemon.ctl({"vm", "delete", name});
  const double delete_s = seconds_since(start);
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output << daemon.log_tail());
  CHECK_FALSE(libvirt_domain(name).exists);
  const auto vfs = all_vfs();
  CHECK(std::find(vfs.begin(), vfs.end(), vf) != vfs.end());
  check_vf_idle(vf);
  CHECK_FALSE(daemon.has_record(name));
  MESSAGE("create " << create_s << " s (placement, VF to vfio-pci, define, QEMU start), delete " << delete_s << " s");
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("3 a VM whose QEMU cannot start leaves no VF on vfio-pci and no device record") {
  TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const std::string name = "e2e-broken";
  const auto created = daemon.ctl({"vm", "create", "--template", kBrokenTemplate, "--name", name});
  INFO(created.output);
  CHECK(created.exit_code != 0);
  CHECK(created.output.find("/nonexistent/vmlinuz") != std::string::npos);
  // It failed at the start, after its VF was bound: what came back was undone, not never done.
  CHECK(daemon.log().find("devices: " + name + ": 1 IOMMU groups on vfio-pci") != std::string::npos);
  CHECK(daemon.log().find("create " + name + " failed at step start and was rolled back") != std::string::npos);
  CHECK_FALSE(libvirt_domain(name).exists);
  for (const auto& vf : all_vfs()) check_vf_idle(vf);
  CHECK_FALSE(daemon.has_record(name));
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("4 a VM outlives a crash of hostagentd, and the restarted daemon gives its VF back on delete") {
  TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const std::string name = "e2e-crash";
  const auto created = daemon.ctl({"vm", "create", "--template", kVfTemplate, "--name", name});
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(name));
  const PciAddress vf = check_vm_holds_a_vf(libvirt_domain(name));

  daemon.kill_hard();
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  // Reconciliation kept the running VM and its VF.
  CHECK(libvirt_domain(name).running);
  CHECK(guest::driver_of(vf) == std::optional<std::string>("vfio-pci"));
  CHECK(daemon.has_record(name));

  const auto deleted = daemon.ctl({"vm", "delete", name});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output << daemon.log_tail());
  CHECK_FALSE(libvirt_domain(name).exists);
  check_vf_idle(vf);
  CHECK_FALSE(daemon.has_record(name));
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("5 a stopped VM whose VF the host took back is prepared again at its start") {
  TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const std::string name = "e2e-again";
  const auto created = daemon.ctl({"vm", "create", "--template", kVfTemplate, "--name", name});
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(name));
  const PciAddress vf = check_vm_holds_a_vf(libvirt_domain(name));
  const auto stopped = daemon.ctl({"vm", "stop", name, "--force"});
  REQUIRE_MESSAGE(stopped.exit_code == 0, stopped.output << daemon.log_tail());
  REQUIRE_FALSE(libvirt_domain(name).running);

  // What a host reboot leaves a VF in: no driver, no override (the domain says managed='no', so
  // libvirt would hand QEMU a VF that is not on vfio-pci).
  guest::require_ok(guest::writer().write("/sys/bus/pci/drivers/vfio-pci/unbind", vf.to_string()), "unbind the VF");
  guest::require_ok(guest::writer().write(guest::pci_path(vf, "driver_override"), "\n"), "clear its override");
  REQUIRE_FALSE(guest::driver_of(vf).has_value());

  auto start = Clock::now();
  const auto restarted = daemon.ctl({"vm", "start", name});
  const double start_s = seconds_since(start);
  REQUIRE_MESSAGE(restarted.exit_code == 0, restarted.output << daemon.log_tail() << libvirt_logs(name));
  CHECK_MESSAGE(libvirt_domain(name).running, libvirt_logs(name));
  CHECK(guest::driver_of(vf) == std::optional<std::string>("vfio-pci"));
  CHECK_MESSAGE(daemon.log().find("devices of " + name + " were not as prepared: IOMMU group") != std::string::npos,
                daemon.log_tail());

  const auto deleted = daemon.ctl({"vm", "delete", name});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output << daemon.log_tail());
  check_vf_idle(vf);
  CHECK_FALSE(daemon.has_record(name));
  MESSAGE("start with the VF bound again " << start_s << " s");
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

}  // namespace hostagent::testing::e2e
