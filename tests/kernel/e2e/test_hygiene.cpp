// Cleaning between tenants on the real-kernel harness (issue 19): the emulated GPU host booted with
// an expansion ROM on every edu (kernel_boot.cpp, "boot hygiene"; emulated_host::edu_option_rom),
// hostagentd preparing its devices itself. A VM's NVMe VF is reset by the kernel and read back after
// the VM goes; a GPU stand-in's ROM is read through sysfs and judged by hygiene.firmware; a reset
// the kernel is told it may not do quarantines the device until an operator clears it; a daemon
// killed mid-cleaning cleans the device again at its next start; the operator's GPU scrubber runs
// while the GPU is on vfio-pci. Each case is a CTest result
// (hygiene:...), starts its own hostagentd on a state directory of its own, and prints how long
// each step took on this kernel. On a tenant's whole NVMe controller (the boot's tenant disk) a
// VM's boot sector (tenant_mbr.S) writes a pattern; the controller stays on vfio-pci from the
// daemon's start (issue 44), the host never has a block device of it, and once the VM is deleted it
// is erased through VFIO, and the next VM's boot sector reads zeros there. The devices one VM lets
// go are cleaned at once, and a reset that never returns (the daemon's step seam) quarantines its
// device at its deadline while the others are freed and placed again (issue 44).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "../emulated_host.hpp"
#include "../guest/guest_host.hpp"
#include "e2e_host.hpp"
#include "hostagent/common/sha256.hpp"

namespace hostagent::testing::e2e {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
constexpr auto kStartTimeout = std::chrono::seconds(120);
constexpr auto kCleaningTimeout = std::chrono::seconds(60);
// SeaBIOS to the boot sector, in a VM under TCG inside the emulated host's TCG.
constexpr auto kTenantBootTimeout = std::chrono::seconds(300);

json::value json_of(const CommandResult& result) {
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  return json::parse(result.output);
}

// hygiene.firmware naming `rom` as the edu's one known-good image.
std::string known_good(const std::string& rom) {
  char id[64];
  std::snprintf(id, sizeof id, "{vendor: 0x%04x, device: 0x%04x, ", emulated_host::kEduVendor,
                emulated_host::kEduDevice);
  return std::string("hygiene:\n  firmware:\n    - ") + id + "sha256: [\"" + sha256_hex(rom) + "\"]}\n";
}

// Until nothing waits for its cleaning, or the timeout.
bool cleaned_within(const Daemon& daemon) {
  return guest::wait_until(
      [&] {
        const auto listed = daemon.ctl({"cleaning", "list", "--json"});
        return listed.exit_code == 0 && json::parse(listed.output).at("devices").as_array().empty();
      },
      kCleaningTimeout);
}

// The device's last cleaning from its history, each step's time printed for the closing note.
json::object last_cleaning(const Daemon& daemon, const PciAddress& device) {
  const auto history = json_of(daemon.ctl({"devices", "history", device.to_string(), "--json"}));
  CHECK(history.at("chain").at("whole").as_bool());
  const auto& cleanings = history.at("cleanings").as_array();
  REQUIRE_FALSE(cleanings.empty());
  auto last = cleanings.back().as_object();
  for (const auto& step : last.at("steps").as_array()) {
    MESSAGE(device.to_string() << " " << json::value_to<std::string>(last.at("role")) << " "
                               << json::value_to<std::string>(step.at("name")) << ": "
                               << json::value_to<std::string>(step.at("result")) << " in "
                               << step.at("seconds").to_number<double>() << " s ("
                               << json::value_to<std::string>(step.at("detail")) << ")");
  }
  return last;
}

// An operator's `devices clean` of `device`, waited for: its cleaning as the history has it.
json::object clean_now(const Daemon& daemon, const PciAddress& device) {
  const auto asked = daemon.ctl({"devices", "clean", device.to_string()});
  REQUIRE_MESSAGE(asked.exit_code == 0, asked.output << daemon.log_tail());
  REQUIRE_MESSAGE(cleaned_within(daemon), daemon.log_tail());
  return last_cleaning(daemon, device);
}

json::object step_named(const json::object& cleaning, const std::string& name) {
  for (const auto& step : cleaning.at("steps").as_array()) {
    if (step.at("name").as_string() == name) return step.as_object();
  }
  FAIL("no step " << name << " in " << json::serialize(cleaning));
  return {};
}

std::string text(const json::object& object, const char* key) {
  return json::value_to<std::string>(object.at(key));
}

bool listed_free(const Daemon& daemon, const PciAddress& device) {
  const auto free = daemon.ctl({"devices", "--free", "--json"});
  return free.exit_code == 0 && free.output.find("\"" + device.to_string() + "\"") != std::string::npos;
}

PciAddress first_gpu() {
  const auto gpus = emulated_devices().gpus;
  REQUIRE_FALSE(gpus.empty());
  return gpus.front();
}

// The kernel's own switch for a function's resets (pci-sysfs.c reset_method_store): "" disables
// every method, "default" brings back those the kernel found.
void set_reset_methods(const PciAddress& device, const std::string& methods) {
  std::ofstream out(guest::pci_path(device, "reset_method"));
  out << methods << "\n";
  out.flush();
  REQUIRE_MESSAGE(out.good(), "cannot write reset_method of " << device.to_string());
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

// The tenant's boot disk: the boot sector (HOSTAGENT_TENANT_MBR) on 1 MiB, as the qcow2 image a
// template's boot.image is.
fs::path tenant_boot_image(const fs::path& dir) {
  std::ifstream in(HOSTAGENT_TENANT_MBR, std::ios::binary);
  std::ostringstream sector;
  sector << in.rdbuf();
  REQUIRE_MESSAGE(sector.str().size() == 512, HOSTAGENT_TENANT_MBR << " is not one boot sector");
  const fs::path raw = dir / "tenant-boot.raw";
  {
    std::ofstream out(raw, std::ios::binary | std::ios::trunc);
    out << sector.str();
  }
  fs::resize_file(raw, std::uintmax_t{1} << 20U);
  fs::path image = dir / "tenant-boot.qcow2";
  const auto converted =
      run_command({"/usr/bin/qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw.string(), image.string()});
  REQUIRE_MESSAGE(converted.exit_code == 0, converted.output);
  return image;
}

// A VM of the e2e-tenant template on `tenant`: created, its boot sector's last word awaited on its
// serial console, deleted. What the console said.
std::string run_tenant(const Daemon& daemon, const fs::path& dir, const std::string& name, const PciAddress& tenant) {
  const auto created = daemon.ctl({"vm", "create", "--template", "e2e-tenant", "--name", name});
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(name));
  const auto held = libvirt_domain(name).hostdevs;
  CHECK_MESSAGE(held == std::vector<PciAddress>{tenant}, "the VM does not hold just " << tenant.to_string());
  const fs::path console = dir / "console" / (name + ".log");
  std::string said;
  const bool done = guest::wait_until(
      [&] {
        std::ifstream in(console);
        std::ostringstream text;
        text << in.rdbuf();
        said = text.str();
        return said.find("tenant: wrote the pattern") != std::string::npos ||
               said.find("failed") != std::string::npos || said.find("did not read back") != std::string::npos;
      },
      kTenantBootTimeout);
  MESSAGE(name << "'s console: " << said);
  CHECK_MESSAGE(done, "no last word from the tenant program in " << console.string() << libvirt_logs(name));
  CHECK_MESSAGE(said.find("tenant: wrote the pattern") != std::string::npos, said);
  const auto deleted = daemon.ctl({"vm", "delete", name});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output << daemon.log_tail());
  return said;
}

// A VM on every NVMe VF of the host (both nodes: two vCPUs, a guest cell each), the tenants'
// controller reserved so that it takes the VFs only.
constexpr const char* kEveryVf = "e2e-every-vf";
void add_every_vf_template(const Daemon& daemon, std::size_t vfs) {
  daemon.add_template(kEveryVf, std::string("name: ") + kEveryVf + "\nextends: " + kVfTemplate +
                                    "\nvcpus: 2\nnvme: " + std::to_string(vfs) + "\n");
}

// The VFs made by an earlier case's daemon, or by one here.
std::vector<PciAddress> made_vfs() {
  if (all_vfs().empty()) {
    TempDir once;
    Daemon making(once.path());
    REQUIRE_MESSAGE(making.start(kStartTimeout), making.log_tail());
    CHECK(making.stop() == 0);
  }
  return all_vfs();
}

// The daemon's own account of a VM's release ("cleaning: vm NAME's release: N devices cleaned in S
// s, their steps T s together"), its last line for that VM; "" when there is none.
std::string release_line(const Daemon& daemon, const std::string& vm) {
  const std::string log = daemon.log();
  const auto at = log.rfind("cleaning: vm " + vm + "'s release: ");
  if (at == std::string::npos) return "";
  return log.substr(at, log.find('\n', at) - at);
}

}  // namespace

TEST_CASE("1 a VM's NVMe VF is reset by the kernel and read back once the VM is deleted, then free again") {
  TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const std::string name = "hygiene-vf";
  const auto created = daemon.ctl({"vm", "create", "--template", kVfTemplate, "--name", name});
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(name));
  const PciAddress vf = check_vm_holds_a_vf(libvirt_domain(name));
  CHECK_FALSE(listed_free(daemon, vf));
  const auto deleted = daemon.ctl({"vm", "delete", name});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output << daemon.log_tail());
  REQUIRE_MESSAGE(cleaned_within(daemon), daemon.log_tail());

  const auto cleaning = last_cleaning(daemon, vf);
  CHECK(text(cleaning, "outcome") == "clean");
  CHECK(text(cleaning, "vm") == name);
  CHECK(text(cleaning, "role") == "nvme");
  const auto reset = step_named(cleaning, "reset");
  CHECK(text(reset, "result") == "passed");
  CHECK_MESSAGE(text(reset, "detail").find("answered as a VF of class 0108") != std::string::npos,
                text(reset, "detail"));
  CHECK(text(step_named(cleaning, "firmware"), "detail") == "no expansion ROM");  // a VF has no ROM BAR
  // The VF's controller had no namespace attached: nothing of the tenant's to erase, and said so.
  const auto erase = step_named(cleaning, "erase");
  CHECK(text(erase, "result") == "passed");
  CHECK_MESSAGE(text(erase, "detail").find("nothing to erase: no namespace is attached to the VF's controller") == 0,
                text(erase, "detail"));
  CHECK(listed_free(daemon, vf));
  check_vf_idle(vf);
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("2 a GPU stand-in whose ROM is on the known-good list passes its cleaning, its ROM's digest kept") {
  TempDir dir;
  Daemon daemon(dir.path(), known_good(emulated_host::edu_option_rom()));
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const auto gpu = first_gpu();
  const auto cleaning = clean_now(daemon, gpu);
  CHECK(text(cleaning, "outcome") == "clean");
  CHECK(text(step_named(cleaning, "reset"), "result") == "passed");
  const auto firmware = step_named(cleaning, "firmware");
  CHECK(text(firmware, "result") == "passed");
  CHECK_MESSAGE(text(firmware, "detail").find(sha256_hex(emulated_host::edu_option_rom())) != std::string::npos,
                text(firmware, "detail"));
  // Still on vfio-pci, where the host keeps its GPUs, and free.
  CHECK(guest::driver_of(gpu) == std::optional<std::string>("vfio-pci"));
  CHECK(listed_free(daemon, gpu));
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("3 a GPU stand-in whose ROM is off the known-good list is quarantined, its ROM's digest named") {
  TempDir dir;
  Daemon daemon(dir.path(), known_good(emulated_host::edu_option_rom('x')));
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const auto gpu = first_gpu();
  const auto cleaning = clean_now(daemon, gpu);
  CHECK(text(cleaning, "outcome") == "quarantined");
  const auto firmware = step_named(cleaning, "firmware");
  CHECK(text(firmware, "result") == "failed");
  CHECK(text(firmware, "detail").find(sha256_hex(emulated_host::edu_option_rom())) != std::string::npos);
  const auto quarantine = json_of(daemon.ctl({"quarantine", "list", "--json"}));
  const auto& listed = quarantine.at("devices").as_array();
  REQUIRE(listed.size() == 1);
  CHECK(text(listed.front().as_object(), "address") == gpu.to_string());
  CHECK(text(listed.front().as_object(), "step") == "firmware");
  CHECK_FALSE(listed_free(daemon, gpu));
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("4 a reset the kernel may not do quarantines the device, and clearing it makes it placeable again") {
  TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const auto gpu = first_gpu();
  const std::string methods = guest::sysfs().read(guest::pci_path(gpu, "reset_method")).value();
  MESSAGE(gpu.to_string() << " resets by: " << methods);
  set_reset_methods(gpu, "");
  const auto cleaning = clean_now(daemon, gpu);
  CHECK(text(cleaning, "outcome") == "quarantined");
  const auto reset = step_named(cleaning, "reset");
  CHECK(text(reset, "result") == "failed");
  CHECK_MESSAGE(text(reset, "detail").find("no reset method") != std::string::npos, text(reset, "detail"));
  CHECK_FALSE(listed_free(daemon, gpu));

  // Repaired, then cleared: placeable, and a cleaning passes again.
  set_reset_methods(gpu, "default");
  const auto cleared = daemon.ctl({"quarantine", "clear", gpu.to_string()});
  REQUIRE_MESSAGE(cleared.exit_code == 0, cleared.output);
  CHECK(listed_free(daemon, gpu));
  CHECK(text(clean_now(daemon, gpu), "outcome") == "clean");
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("5 a daemon killed during a cleaning cleans the device again at its next start") {
  TempDir dir;
  Daemon daemon(dir.path());
  // The cleaning stops before its firmware step, its reset done: SIGKILL there.
  const fs::path paused = dir.path() / "paused";
  REQUIRE_MESSAGE(daemon.start(kStartTimeout, {"--pause-at", "clean:firmware", "--pause-marker", paused.string()}),
                  daemon.log_tail());
  const auto gpu = first_gpu();
  REQUIRE(daemon.ctl({"devices", "clean", gpu.to_string()}).exit_code == 0);
  REQUIRE_MESSAGE(guest::wait_until([&] { return fs::exists(paused); }, kCleaningTimeout), daemon.log_tail());
  daemon.kill_hard();
  const fs::path states = dir.path() / "state" / "device_states.json";
  std::ifstream in(states);
  std::ostringstream written;
  written << in.rdbuf();
  REQUIRE_MESSAGE(written.str().find("\"" + gpu.to_string() + "\"") != std::string::npos, written.str());
  CHECK(written.str().find("\"cleaning\"") != std::string::npos);

  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  REQUIRE_MESSAGE(cleaned_within(daemon), daemon.log_tail());
  const auto history = json_of(daemon.ctl({"devices", "history", gpu.to_string(), "--json"}));
  // One cleaning on record: the one the restart ran; the killed one never reached the evidence.
  CHECK(history.at("cleanings").as_array().size() == 1);
  CHECK(text(last_cleaning(daemon, gpu), "outcome") == "clean");
  CHECK(listed_free(daemon, gpu));
  CHECK_MESSAGE(daemon.log().find("cleaning: " + gpu.to_string()) != std::string::npos, daemon.log_tail());
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE(
    "6 the operator's GPU scrubber runs with the GPU's address while it is on vfio-pci, and its failure quarantines") {
  // `test -L` as the scrubber: it passes only when run with this GPU's address, bound to that driver.
  const auto scrubbing = [](const std::string& driver) {
    return "hygiene:\n  gpu_scrub:\n    argv: [/usr/bin/test, -L, \"/sys/bus/pci/drivers/" + driver +
           "/{address}\"]\n    timeout: 30s\n";
  };
  const auto gpu = first_gpu();
  {
    TempDir dir;
    Daemon daemon(dir.path(), scrubbing("vfio-pci"));
    REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
    const auto cleaning = clean_now(daemon, gpu);
    CHECK(text(cleaning, "outcome") == "clean");
    CHECK_MESSAGE(text(step_named(cleaning, "scrub"), "detail") == "scrubbed by /usr/bin/test (exit status 0)",
                  text(step_named(cleaning, "scrub"), "detail"));
    CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
  }
  TempDir dir;
  Daemon daemon(dir.path(), scrubbing("nvme"));
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const auto cleaning = clean_now(daemon, gpu);
  CHECK(text(cleaning, "outcome") == "quarantined");
  CHECK(text(step_named(cleaning, "scrub"), "detail") == "/usr/bin/test exited with status 1");
  const auto quarantine = json_of(daemon.ctl({"quarantine", "list", "--json"}));
  REQUIRE(quarantine.at("devices").as_array().size() == 1);
  CHECK(text(quarantine.at("devices").as_array().front().as_object(), "step") == "scrub");
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE(
    "7 a tenant's whole NVMe stays on vfio-pci unseen by the host, is erased through VFIO, and the next VM reads "
    "zeros") {
  const auto tenant = tenant_controller();
  // The VMs' one NVMe is the tenant's controller: the VFs (made by an earlier case's daemon, or by
  // one here) are kept out of placement.
  if (all_vfs().empty()) {
    TempDir once;
    Daemon making(once.path());
    REQUIRE_MESSAGE(making.start(kStartTimeout), making.log_tail());
    CHECK(making.stop() == 0);
  }
  TempDir dir;
  // The VMs' boot disks are overlays libvirt makes in a pool (storage.pool).
  start_dir_pool("hygiene-tenant", dir.path() / "pool");
  Daemon daemon(dir.path(), "storage: {pool: hygiene-tenant}\n", all_vfs());
  // One guest cell, so one pxb-pcie: SeaBIOS numbers only expanders with a device on them, and an
  // empty one before the NVMe's makes its boot path miss the one QEMU writes (helper finding).
  daemon.add_template("e2e-tenant", "name: e2e-tenant\nextends: e2e-nvme-vf\nguest_numa: {cells: 1}\nboot: {image: \"" +
                                        tenant_boot_image(dir.path()).string() + "\", from_nvme: true}\n");
  const fs::path paused = dir.path() / "paused";
  REQUIRE_MESSAGE(daemon.start(kStartTimeout, {"--pause-at", "clean:erase", "--pause-marker", paused.string()}),
                  daemon.log_tail());

  // Where the host keeps it from its start: on vfio-pci, seen by no host driver.
  CHECK(guest::driver_of(tenant) == std::optional<std::string>("vfio-pci"));
  CHECK_MESSAGE(host_views_of_tenant().empty(), joined(host_views_of_tenant()));

  // The first tenant's VM finds zeros on a fresh namespace, and writes its pattern.
  const auto first = run_tenant(daemon, dir.path(), "tenant-1", tenant);
  CHECK_MESSAGE(first.find("tenant: found zeros") != std::string::npos, first);
  // Its cleaning stops before the erase (--pause-at). What the VM left is on the media, and the
  // host has no view of it: the controller stayed on vfio-pci, no block device, no partition scan.
  // Then the daemon is killed there, and its next start cleans.
  REQUIRE_MESSAGE(guest::wait_until([&] { return fs::exists(paused); }, kCleaningTimeout), daemon.log_tail());
  CHECK(guest::driver_of(tenant) == std::optional<std::string>("vfio-pci"));
  CHECK_MESSAGE(host_views_of_tenant().empty(), joined(host_views_of_tenant()));
  daemon.kill_hard();
  CHECK(guest::driver_of(tenant) == std::optional<std::string>("vfio-pci"));
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  REQUIRE_MESSAGE(cleaned_within(daemon), daemon.log_tail());
  const auto cleaning = last_cleaning(daemon, tenant);
  CHECK(text(cleaning, "outcome") == "clean");
  CHECK(text(cleaning, "vm") == "tenant-1");
  // Reset where it stands, under vfio-pci: never given to nvme for it (issue 43's wedge was a reset
  // under nvme while it scanned the controller it had just been given back).
  const auto reset = step_named(cleaning, "reset");
  CHECK(text(reset, "result") == "passed");
  CHECK_MESSAGE(text(reset, "detail").find("off nvme") == std::string::npos, text(reset, "detail"));
  const auto erase = step_named(cleaning, "erase");
  CHECK(text(erase, "result") == "passed");
  CHECK_MESSAGE(text(erase, "detail").find("format (user data erase) of ") == 0, text(erase, "detail"));
  CHECK_MESSAGE(text(erase, "detail").find("namespace 1: 16 blocks read back, all 0x00") != std::string::npos,
                text(erase, "detail"));
  CHECK_MESSAGE(text(erase, "detail").find("; through VFIO, on vfio-pci") != std::string::npos, text(erase, "detail"));
  CHECK(guest::driver_of(tenant) == std::optional<std::string>("vfio-pci"));
  CHECK_MESSAGE(host_views_of_tenant().empty(), joined(host_views_of_tenant()));

  // The next tenant's VM, given the same controller, reads zeros where the pattern was.
  const auto second = run_tenant(daemon, dir.path(), "tenant-2", tenant);
  CHECK_MESSAGE(second.find("tenant: found zeros") != std::string::npos, second);
  CHECK_MESSAGE(second.find("found the pattern") == std::string::npos, second);
  REQUIRE_MESSAGE(cleaned_within(daemon), daemon.log_tail());
  CHECK(listed_free(daemon, tenant));
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("8 the devices one VM lets go are cleaned at once, each reset beside the others") {
  const auto vfs = made_vfs();
  REQUIRE(vfs.size() >= 4);
  TempDir dir;
  Daemon daemon(dir.path(), "", {tenant_controller()});
  add_every_vf_template(daemon, vfs.size());
  REQUIRE_MESSAGE(daemon.start(kStartTimeout), daemon.log_tail());
  const std::string name = "hygiene-every-vf";
  const auto created = daemon.ctl({"vm", "create", "--template", kEveryVf, "--name", name});
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(name));
  const auto deleted = daemon.ctl({"vm", "delete", name});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output << daemon.log_tail());
  REQUIRE_MESSAGE(cleaned_within(daemon), daemon.log_tail());

  CHECK(libvirt_domain(name).exists == false);
  // Every VF clean, and their resets under way together: the latest start before the earliest end.
  std::string latest_start;
  std::string earliest_end = "~";
  for (const auto& vf : vfs) {
    const auto cleaning = last_cleaning(daemon, vf);
    CHECK(text(cleaning, "outcome") == "clean");
    CHECK(text(cleaning, "vm") == name);
    const auto reset = step_named(cleaning, "reset");
    latest_start = std::max(latest_start, text(reset, "started_at"));
    earliest_end = std::min(earliest_end, text(reset, "finished_at"));
    CHECK(listed_free(daemon, vf));
  }
  CHECK_MESSAGE(latest_start < earliest_end, "the resets ran one after another: the last began at "
                                                 << latest_start << ", the first ended at " << earliest_end);
  const std::string release = release_line(daemon, name);
  CHECK_MESSAGE(release.find(std::to_string(vfs.size()) + " devices cleaned in ") != std::string::npos,
                daemon.log_tail());
  MESSAGE(release);
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

TEST_CASE("9 a reset that never returns quarantines its device at its deadline, and the others are freed and placed") {
  const auto vfs = made_vfs();
  REQUIRE(vfs.size() >= 4);
  const PciAddress wedged = vfs.front();
  TempDir dir;
  // The wedge: this VF's reset held forever (the daemon's step seam, inside the step's time), as a
  // reset the kernel never finishes holds its writer; its deadline cut to 10 s.
  Daemon daemon(dir.path(), "hygiene: {deadlines: {nvme: {reset: 10s}}}\n", {tenant_controller()});
  add_every_vf_template(daemon, vfs.size());
  daemon.add_template("e2e-vfs-but-one", std::string("name: e2e-vfs-but-one\nextends: ") + kEveryVf +
                                             "\nnvme: " + std::to_string(vfs.size() - 1) + "\n");
  const fs::path paused = dir.path() / "paused";
  REQUIRE_MESSAGE(daemon.start(kStartTimeout,
                               {"--pause-at", "clean:reset:" + wedged.to_string(), "--pause-marker", paused.string()}),
                  daemon.log_tail());
  const std::string name = "hygiene-wedged";
  const auto created = daemon.ctl({"vm", "create", "--template", kEveryVf, "--name", name});
  REQUIRE_MESSAGE(created.exit_code == 0, created.output << daemon.log_tail() << libvirt_logs(name));
  const auto deleted = daemon.ctl({"vm", "delete", name});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output << daemon.log_tail());
  REQUIRE_MESSAGE(guest::wait_until([&] { return fs::exists(paused); }, kCleaningTimeout), daemon.log_tail());
  REQUIRE_MESSAGE(cleaned_within(daemon), daemon.log_tail());

  const auto quarantine = json_of(daemon.ctl({"quarantine", "list", "--json"}));
  const auto& listed = quarantine.at("devices").as_array();
  REQUIRE(listed.size() == 1);
  CHECK(text(listed.front().as_object(), "address") == wedged.to_string());
  CHECK(text(listed.front().as_object(), "step") == "reset");
  CHECK_MESSAGE(text(listed.front().as_object(), "reason").find("within its deadline of 10s") != std::string::npos,
                text(listed.front().as_object(), "reason"));
  for (const auto& vf : vfs) {
    if (vf == wedged) continue;
    CHECK(text(last_cleaning(daemon, vf), "outcome") == "clean");
    CHECK(listed_free(daemon, vf));
  }
  CHECK_FALSE(listed_free(daemon, wedged));
  MESSAGE(release_line(daemon, name));

  // The next VM gets every freed VF, and not the wedged one (every VF but one: only those are free).
  const std::string next = "hygiene-after-wedge";
  const auto again = daemon.ctl({"vm", "create", "--template", "e2e-vfs-but-one", "--name", next});
  REQUIRE_MESSAGE(again.exit_code == 0, again.output << daemon.log_tail() << libvirt_logs(next));
  const auto held = libvirt_domain(next).hostdevs;
  CHECK(held.size() == vfs.size() - 1);
  for (const auto& vf : vfs) {
    const bool given = std::find(held.begin(), held.end(), vf) != held.end();
    CHECK_MESSAGE(given == (vf != wedged), vf.to_string() << (given ? " was given" : " was not given"));
  }
  const auto gone = daemon.ctl({"vm", "delete", next});
  REQUIRE_MESSAGE(gone.exit_code == 0, gone.output << daemon.log_tail());
  REQUIRE_MESSAGE(cleaned_within(daemon), daemon.log_tail());
  CHECK_MESSAGE(daemon.stop() == 0, daemon.log_tail());
}

}  // namespace hostagent::testing::e2e
