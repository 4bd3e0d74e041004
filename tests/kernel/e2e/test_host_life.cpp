// A host's life across a reboot, on the real-kernel harness: the emulated GPU host boots twice on
// one disk (kernel_boot.cpp, "boot host life"), an NVMe it mounts at kPersistentMount that holds
// hostagentd's state and libvirt's domain configuration. The cases named "before the reboot" run in
// the first boot, those "after the reboot" in the second; each is a CTest result (host_life:...),
// and each starts its own hostagentd on the same state directory, as a host's systemd would.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../emulated_host.hpp"
#include "../guest/guest_host.hpp"
#include "e2e_host.hpp"
#include "harness/host_root.hpp"
#include "tenant_storage.hpp"

namespace hostagent::testing::e2e {
namespace {

namespace fs = std::filesystem;
constexpr auto kStartTimeout = std::chrono::seconds(120);
constexpr const char* kVm = "life-vf";                // running when the host goes down
constexpr const char* kTenantVm = "life-tenant";      // running too, on the tenants' whole controller
constexpr const char* kUndefined = "life-undefined";  // its domain undefined outside hostagent
constexpr const char* kAllNvme = "life-all-nvme";     // asks for every NVMe the host has

// hostagentd's directory on the disk that outlives the reboot.
fs::path daemon_dir() {
  return fs::path(kernel::kPersistentMount) / "hostagent";
}
// What the first boot saw of the VM, for the second to compare: its VF's address.
fs::path recorded_vf() {
  return fs::path(kernel::kPersistentMount) / "life-vf.address";
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether a file system is mounted at `path` (the mount point field of /proc/self/mountinfo).
bool mounted_at(const std::string& path) {
  std::istringstream lines(read_text("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    if (point == path) return true;
  }
  return false;
}

// The NVMe controller whose namespace is the persistent disk (QEMU's serial, qemu_command.cpp).
std::optional<PciAddress> persistent_nvme() {
  for (const auto& f : guest::pci_functions(emulated_host::kNvmeVendor, emulated_host::kNvmeDevice)) {
    std::error_code ec;
    for (const auto& controller : fs::directory_iterator(guest::pci_path(f, "nvme"), ec)) {
      if (read_text(controller.path() / "serial").find("hostagent-persist") == 0) return f;
    }
  }
  return std::nullopt;
}

boost::json::value json_of(const CommandResult& result) {
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  return boost::json::parse(result.output);
}

// Until libvirt says the VM runs, or timeout.
bool runs_within(const std::string& name, std::chrono::seconds timeout) {
  return guest::wait_until([&] { return libvirt_domain(name).running; }, timeout);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// blkid's answer for the tenant's file system label, its cache left out: the device that holds it, or
// "" when no block device the host has carries it.
std::string blkid_of_tenant_label() {
  const auto found = run_command({"/usr/sbin/blkid", "-c", "/dev/null", "-L", emulated_host::kTenantFsLabel});
  return found.exit_code == 0 ? found.output : "";
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

// The host's own VG, on its persistent disk (tenant_storage.hpp).
HostVg own_vg() {
  return host_vg_on(kernel::kPersistentMount);
}

// Nothing of what the tenant planted shows in any of the host's tools, and the host's own VG is
// listed once, as it made it.
void check_tenant_storage_unseen() {
  const auto traces = host_traces_of_tenant_storage(own_vg());
  CHECK_MESSAGE(traces.empty(), "the host sees the tenant's storage:\n" << joined(traces));
  const auto problems = host_vg_problems(own_vg());
  CHECK_MESSAGE(problems.empty(), joined(problems));
}

bool any_from(const std::vector<std::string>& traces, const std::string& tool) {
  return std::any_of(traces.begin(), traces.end(),
                     [&](const std::string& trace) { return trace.rfind(tool + ": ", 0) == 0; });
}

}  // namespace

// What every host does before hostagent holds anything, and what the later cases show it no longer
// does: the first boot's nvme, with no held-at-boot list yet, takes the tenant's controller, and
// the host's storage stack reads what a tenant left on it. The test writes it there, standing in
// for the tenant (tenant_storage.hpp): a GPT, ext4 with a label, an LVM PV whose VG has the name of
// the host's own VG, and an md superblock.
TEST_CASE(
    "0 before the reboot: with no held-at-boot list yet, nvme takes the tenant's controller and the host's "
    "tools read what a tenant left") {
  const PciAddress tenant = tenant_controller();
  REQUIRE(guest::driver_of(tenant) == std::optional<std::string>("nvme"));
  REQUIRE_MESSAGE(mounted_at(kernel::kPersistentMount), "the persistent disk is not mounted: see the console");
  make_host_vg(own_vg());
  const auto before = host_vg_problems(own_vg());
  CHECK_MESSAGE(before.empty(), joined(before));
  plant_tenant_storage(tenant);

  const auto traces = host_traces_of_tenant_storage(own_vg());
  MESSAGE("exposed at the first boot:\n" << joined(traces));
  // Each view the later cases check shows it here: none of their checks is one that cannot fail.
  for (const std::string tool : {"blkid", "lsblk", "pvs", "vgs", "mdadm --examine --scan", "/proc/partitions"}) {
    CHECK_MESSAGE(any_from(traces, tool), tool << " shows nothing of the tenant's storage");
  }
  CHECK_MESSAGE(!blkid_of_tenant_label().empty(), "blkid did not find the label " << emulated_host::kTenantFsLabel);
  // Two VGs with the host's VG's name: LVM now refuses the host's own by its name.
  const auto problems = host_vg_problems(own_vg());
  CHECK_FALSE(problems.empty());
  MESSAGE("the host's VG with the tenant's PV in view: " << joined(problems) << host_vg_activation_problem());
}

TEST_CASE("1 before the reboot: the NVMe the host mounted is the host's, and a create for every NVMe never gets it") {
  const auto mounted = persistent_nvme();
  REQUIRE_MESSAGE(mounted.has_value(), "no NVMe with serial hostagent-persist");
  REQUIRE_MESSAGE(mounted_at(kernel::kPersistentMount), "the persistent disk is not mounted: see the console");
  Daemon daemon(daemon_dir());
  // Every NVMe this host has: the VFs hostagentd makes at start, the tenants' controller, and the
  // mounted one.
  const auto vfs = static_cast<int>(emulated_devices().nvme_pfs.size()) * kVfsPerPf;
  // Two vCPUs: the NVMe lie on both nodes, and each guest cell takes one.
  daemon.add_template(kAllNvme, std::string("name: ") + kAllNvme + "\nextends: " + kVfTemplate +
                                    "\nvcpus: 2\nnvme: " + std::to_string(vfs + 2) + "\n");
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());

  const auto devices = json_of(daemon.ctl({"devices", "--role", "nvme", "--json"}));
  std::string host_use;
  for (const auto& device : devices.at("devices").as_array()) {
    if (device.at("address").as_string() == mounted->to_string() && device.at("host_use").is_string()) {
      host_use = device.at("host_use").as_string().c_str();
    }
  }
  CHECK_MESSAGE(host_use.find(std::string("mounted at ") + kernel::kPersistentMount) != std::string::npos,
                "host_use of " << mounted->to_string() << ": " << host_use);

  const auto refused = daemon.ctl({"vm", "create", "--template", kAllNvme, "--name", "life-all"});
  CHECK(refused.exit_code != 0);
  CHECK_MESSAGE(refused.output.find(mounted->to_string() + " used by the host") != std::string::npos, refused.output);
  CHECK_FALSE(libvirt_domain("life-all").exists);
  // Still the host's: on its driver, its file system in use.
  CHECK(guest::driver_of(*mounted) == std::optional<std::string>("nvme"));
  CHECK(fs::exists(daemon_dir() / "state"));
  // The tenants' controller went to vfio-pci at the start, and is listed for the next boot; the
  // mounted one is not.
  const PciAddress tenant = tenant_controller();
  CHECK(guest::driver_of(tenant) == std::optional<std::string>("vfio-pci"));
  const std::string held = read_text(daemon_dir() / "state" / "held-at-boot");
  CHECK_MESSAGE(held.find(tenant.to_string() + "\n") != std::string::npos, held);
  CHECK_MESSAGE(held.find(mounted->to_string()) == std::string::npos, held);
  // nvme let it go, and with it every block device of it: nothing the tenant left shows.
  check_tenant_storage_unseen();
  CHECK(host_vg_activation_problem().empty());
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE(
    "2 before the reboot: a VM with an NVMe VF, and one holding the tenants' controller, run when the host goes down") {
  Daemon daemon(daemon_dir());
  // Every NVMe of node 1, whose one CPU for VMs is left once the first VM has node 0's: its PF's
  // VFs and the tenants' controller.
  daemon.add_template(kTenantVm, std::string("name: ") + kTenantVm + "\nextends: " + kVfTemplate +
                                     "\nnvme: " + std::to_string(kVfsPerPf + 1) + "\n");
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const auto created = daemon.ctl({"vm", "create", "--template", kVfTemplate, "--name", kVm});
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(kVm));
  const PciAddress vf = check_vm_holds_a_vf(libvirt_domain(kVm));
  CHECK(daemon.has_record(kVm));
  std::ofstream(recorded_vf()) << vf.to_string();
  const auto tenant = daemon.ctl({"vm", "create", "--template", kTenantVm, "--name", kTenantVm});
  REQUIRE_MESSAGE(tenant.exit_code == 0, tenant.output << daemon.log_tail() << libvirt_logs(kTenantVm));
  const auto held = libvirt_domain(kTenantVm).hostdevs;
  CHECK_MESSAGE(std::find(held.begin(), held.end(), tenant_controller()) != held.end(),
                kTenantVm << " does not hold the tenants' controller");
  check_tenant_storage_unseen();
  // hostagentd stops as systemd stops it at shutdown; the VMs run until the power goes.
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
  CHECK(libvirt_domain(kVm).running);
  CHECK(libvirt_domain(kTenantVm).running);
  ::sync();
}

// The second boot's initramfs carries the list the first boot's hostagentd left (kernel_boot.cpp),
// and nvme was loaded through the package's install line (host_root.cpp): before any hostagentd of
// this boot, the tenant's controller is held from nvme, and nothing of it reaches the host.
// The host's kernel as it booted (the harness boots the oldest kernel installed first: Debian 12's
// 6.1 beside the current stack's 6.12), read by `hostagentctl host check` with its VMs running.
TEST_CASE("3 before the reboot: hostagentctl host check reads the kernel the host booted") {
  MESSAGE("kernel " << read_text("/proc/sys/kernel/osrelease"));
  check_host_check_reads_this_kernel();
}

TEST_CASE("4 after the reboot: before hostagentd starts, the tenant's controller was held from nvme at boot") {
  REQUIRE_MESSAGE(mounted_at(kernel::kPersistentMount), "the persistent disk is not mounted: see the console");
  const PciAddress tenant = tenant_controller();
  const auto override_now = guest::sysfs().read(guest::pci_path(tenant, "driver_override"));
  CHECK_MESSAGE((override_now.ok() && *override_now == "vfio-pci"),
                (override_now.ok() ? *override_now : override_now.error().message));
  const auto driver = guest::driver_of(tenant);
  CHECK_MESSAGE((!driver || *driver == "vfio-pci"), "the tenant's controller is on " << driver.value_or("?"));
  CHECK_FALSE(fs::exists(guest::pci_path(tenant, "nvme")));
  CHECK_MESSAGE(blkid_of_tenant_label().empty(), "blkid found " << blkid_of_tenant_label());
  // The host's own VG, its loop device set up again, is the only one of its name, and activates.
  attach_host_vg(own_vg());
  check_tenant_storage_unseen();
  const auto activation = host_vg_activation_problem();
  CHECK_MESSAGE(activation.empty(), activation);
  // The hold says what it did in the kernel's log, where an operator reads the boot.
  const auto log = run_command({"/usr/bin/dmesg"});
  CHECK_MESSAGE(
      log.output.find("hostagent: hold-at-boot: " + tenant.to_string() + " held for vfio-pci") != std::string::npos,
      log.output.substr(log.output.size() > 3000 ? log.output.size() - 3000 : 0));
  // The host's own NVMe came up: its disk is mounted (above), on nvme.
  const auto mounted = persistent_nvme();
  REQUIRE(mounted.has_value());
  CHECK(guest::driver_of(*mounted) == std::optional<std::string>("nvme"));
}

TEST_CASE("5 after the reboot: hostagentd starts the VMs that were running, their devices on vfio-pci again") {
  REQUIRE_MESSAGE(mounted_at(kernel::kPersistentMount), "the persistent disk is not mounted: see the console");
  REQUIRE_MESSAGE(fs::exists(recorded_vf()), "the first boot recorded no VM");
  const auto vf = PciAddress::parse(read_text(recorded_vf()));
  REQUIRE(vf.ok());
  // A new boot: no VFs until hostagentd makes them, and libvirt's domain kept, shut off.
  CHECK(all_vfs().empty());
  const auto kept = libvirt_domain(kVm);
  CHECK(kept.exists);
  CHECK_FALSE(kept.running);

  Daemon daemon(daemon_dir());
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  REQUIRE_MESSAGE(runs_within(kVm, std::chrono::seconds(180)), daemon.log_tail() << libvirt_logs(kVm));
  MESSAGE("the VM ran again " << seconds_since(start) << " s after hostagentd started (TCG)");
  CHECK(check_vm_holds_a_vf(libvirt_domain(kVm)) == *vf);
  // The tenant's VM too, on the controller that was held from nvme all through the boot.
  REQUIRE_MESSAGE(runs_within(kTenantVm, std::chrono::seconds(180)), daemon.log_tail() << libvirt_logs(kTenantVm));
  const auto held = libvirt_domain(kTenantVm).hostdevs;
  CHECK(std::find(held.begin(), held.end(), tenant_controller()) != held.end());
  CHECK(guest::driver_of(tenant_controller()) == std::optional<std::string>("vfio-pci"));
  check_tenant_storage_unseen();
  const auto status = json_of(daemon.ctl({"status", "--json"}));
  const auto& report = status.at("last_reconcile");
  CHECK(report.at("host_rebooted").as_bool());
  std::vector<std::string> started;
  for (const auto& name : report.at("boot_starts").as_array()) started.emplace_back(name.as_string().c_str());
  std::sort(started.begin(), started.end());
  CHECK(started == std::vector<std::string>{kTenantVm, kVm});
  CHECK_MESSAGE(
      daemon.log().find(std::string("devices of ") + kVm + " were not as prepared: IOMMU group") != std::string::npos,
      daemon.log_tail());
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE(
    "6 after the reboot: the VMs are deleted, the VF given back, the tenants' controller unseen before its erase and "
    "after") {
  Daemon daemon(daemon_dir());
  // The tenants' controller's cleaning stops before its erase: what the tenant left is on the media.
  const fs::path paused = "/tmp/host-life-paused";
  const std::vector<std::string> pause = {"--pause-at", "clean:erase:" + tenant_controller().to_string(),
                                          "--pause-marker", paused.string()};
  REQUIRE_MESSAGE(daemon.start(kStartTimeout, pause), daemon.log_tail());
  const auto vf = PciAddress::parse(read_text(recorded_vf()));
  REQUIRE(vf.ok());
  const auto deleted = daemon.ctl({"vm", "delete", kVm});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output << daemon.log_tail());
  CHECK_FALSE(libvirt_domain(kVm).exists);
  check_vf_idle(*vf);
  CHECK_FALSE(daemon.has_record(kVm));

  const auto tenant = daemon.ctl({"vm", "delete", kTenantVm});
  REQUIRE_MESSAGE(tenant.exit_code == 0, tenant.output << daemon.log_tail());
  REQUIRE_MESSAGE(guest::wait_until([&] { return fs::exists(paused); }, std::chrono::seconds(120)), daemon.log_tail());
  CHECK(guest::driver_of(tenant_controller()) == std::optional<std::string>("vfio-pci"));
  check_tenant_storage_unseen();
  // Killed there; its next start cleans the controller again, the erase this time.
  daemon.kill_hard();
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const bool cleaned = guest::wait_until(
      [&] {
        const auto listed = daemon.ctl({"cleaning", "list", "--json"});
        return listed.exit_code == 0 && boost::json::parse(listed.output).at("devices").as_array().empty();
      },
      std::chrono::seconds(120));
  REQUIRE_MESSAGE(cleaned, daemon.log_tail());
  const auto history = json_of(daemon.ctl({"devices", "history", tenant_controller().to_string(), "--json"}));
  const auto& last = history.at("cleanings").as_array().back().as_object();
  CHECK(last.at("outcome").as_string() == "clean");
  std::string erase;
  for (const auto& step : last.at("steps").as_array()) {
    if (step.at("name").as_string() == "erase") erase = step.at("detail").as_string().c_str();
  }
  CHECK_MESSAGE(erase.find("; through VFIO, on vfio-pci") != std::string::npos, erase);
  // The read-back samples the namespace from its first block to its last: the GPT's two headers and
  // the file system, the PV and the md member between them (nvme_erase.cpp read_back), all zeros.
  CHECK_MESSAGE(erase.find("16 blocks read back, all 0x00") != std::string::npos, erase);
  MESSAGE("the tenants' controller after the reboot: " << erase);
  CHECK(guest::driver_of(tenant_controller()) == std::optional<std::string>("vfio-pci"));
  check_tenant_storage_unseen();
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("7 after the reboot: a VM whose domain is undefined with libvirt directly has its devices released at once") {
  Daemon daemon(daemon_dir());
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const auto created = daemon.ctl({"vm", "create", "--template", kVfTemplate, "--name", kUndefined});
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(kUndefined));
  const PciAddress vf = check_vm_holds_a_vf(libvirt_domain(kUndefined));

  destroy_and_undefine(kUndefined);
  const auto undefined = std::chrono::steady_clock::now();
  // The same hostagentd, told by libvirt's events: no restart, no command.
  const bool released = guest::wait_until(
      [&] { return !daemon.has_record(kUndefined) && !guest::driver_of(vf).has_value(); }, std::chrono::seconds(60));
  CHECK_MESSAGE(released, daemon.log_tail());
  MESSAGE("its VF was given back " << seconds_since(undefined) << " s after the undefine");
  check_vf_idle(vf);
  const auto listed = json_of(daemon.ctl({"vm", "list", "--json"}));
  for (const auto& vm : listed.at("vms").as_array()) CHECK(vm.at("name").as_string() != kUndefined);
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

// After the reboot the host runs the newest kernel installed: an upgrade from Debian 12's 6.1 to
// 6.12 where both are (kernel_boot.cpp, "boot host life"). Its verdicts follow the new release.
TEST_CASE("8 after the reboot: hostagentctl host check reads the kernel the host was upgraded to") {
  MESSAGE("kernel " << read_text("/proc/sys/kernel/osrelease"));
  check_host_check_reads_this_kernel();
}

}  // namespace hostagent::testing::e2e
