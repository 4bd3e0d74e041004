// devices/device_cleaning against the fake kernel on vela2: each role gets its steps; a reset is
// written and proved by config space (libpci over the tree); a ROM is hashed and judged by the
// operator's list (on it: passed; off it: failed; no list: skipped with the hash); a VF's settings
// are read back; an NVMe is erased and read back through a fake controller (fake_nvme.hpp); a
// GPU's scrubber runs; everything on a libvirt-managed host is skipped with why.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>

#include "fake_host.hpp"
#include "fake_nvme.hpp"
#include "fake_rom.hpp"
#include "fake_vf_netlink.hpp"
#include "hostagent/common/sha256.hpp"
#include "hostagent/devices/device_cleaning.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/discovery/host_use_reader.hpp"
#include "hostagent/vfio/config_space_access.hpp"
#include "test_support.hpp"

namespace hostagent::devices {
namespace {

using sriov::fake::FakeVfNetlink;
using testing::builtin_spec;
using testing::contains;
using testing::FakeHost;
using testing::TempDir;

const std::string kGpu = "0000:18:00.0";   // vela2's first H100, 10de:2330
const std::string kNvme = "0000:ad:00.0";  // one of vela2's data NVMe

std::string gpu_vbios(char fill) {
  return "\x55\xAA" + std::string(4096, fill);
}

struct CleaningFixture {
  CleaningFixture() : host(builtin_spec("vela2")), sysfs(*SysfsRoot::open(host.root())) {
    auto discovered = discovery::discover_from_sysfs(host.root());
    REQUIRE_MESSAGE(discovered.ok(), discovered.error().message);
    model = std::move(discovered).value();
    auto made = vfio::make_libpci_config_space(host.root());
    REQUIRE_MESSAGE(made.ok(), made.error().message);
    config = std::move(made).value();
    for (const auto& f : model.pci_devices) {
      if (f.sriov && !f.net_interfaces.empty()) {
        netlink.add_pf(f.net_interfaces.front(), static_cast<int>(f.sriov->vfs.size()));
      }
    }
    hygiene.reset_polling.polls = 3;
    hygiene.reset_polling.sleep = [](std::chrono::milliseconds) {};
  }

  const numa::PciFunction& function(const std::string& address) const {
    const auto* found = model.find(*PciAddress::parse(address));
    REQUIRE(found != nullptr);
    return *found;
  }
  const numa::PciFunction& first_vf() const {
    const auto it = std::find_if(model.pci_devices.begin(), model.pci_devices.end(), [](const numa::PciFunction& f) {
      return f.physfn.has_value() && f.role == numa::PciRole::nic;
    });
    REQUIRE(it != model.pci_devices.end());
    return *it;
  }

  // As the preparer gives them: what the host uses read from the tree at each call, with the
  // operator's reservations.
  CleaningParts parts() {
    return {&model,
            &sysfs,
            &host.kernel(),
            config.get(),
            &netlink,
            &hygiene,
            &nvme,
            [this]() -> Result<std::vector<numa::HostUse>> {
              HA_TRY(auto uses, discovery::detect_host_use(host.root()));
              uses.insert(uses.end(), reserved.begin(), reserved.end());
              return uses;
            }};
  }

  // Each step run in order, as the daemon does: name -> outcome, stopping at the first failure.
  std::vector<std::pair<std::string, StepOutcome>> clean(const numa::PciFunction& f) {
    std::vector<std::pair<std::string, StepOutcome>> out;
    for (const auto& step : host_cleaning_steps(parts(), f)) {
      out.emplace_back(step.name, step.run());
      if (out.back().second.result == StepResult::failed) break;
    }
    return out;
  }

  FakeHost host;
  SysfsRoot sysfs;
  numa::HostModel model;
  std::unique_ptr<vfio::ConfigSpace> config;
  FakeVfNetlink netlink;
  HygieneOptions hygiene;
  std::vector<numa::HostUse> reserved;  // devices.reserved
  testing::FakeNvmeState nvme_state;
  testing::FakeNvmeOpener nvme{nvme_state};
};

// The nvme driver's view of a controller it drives: nvme/NAME/state, and a generic device per
// namespace beside it (drivers/nvme/host/core.c). The controller simhost named, where it named one.
std::string drive_nvme(const FakeHost& host, const std::string& address, const std::string& state,
                       const std::vector<std::string>& generic) {
  const auto named = host.sysfs().list("/sys/bus/pci/devices/" + address + "/nvme", true).value();
  std::string name = named.empty() ? "nvme5" : named.front();
  const std::string dir = "/sys/bus/pci/devices/" + address + "/nvme/" + name;
  host.make_file(dir + "/state");
  std::ofstream(host.host(dir + "/state")) << state << "\n";
  for (const auto& device : generic) host.make_file(dir + "/" + device + "/dev");
  return name;
}

void rebind(FakeHost& host, const std::string& bdf, const std::string& driver) {
  auto& kernel = host.kernel();
  if (!host.driver_of(bdf).empty()) REQUIRE(kernel.write("/sys/bus/pci/devices/" + bdf + "/driver/unbind", bdf).ok());
  REQUIRE(kernel.write("/sys/bus/pci/devices/" + bdf + "/driver_override", driver).ok());
  REQUIRE(kernel.write("/sys/bus/pci/drivers_probe", bdf).ok());
  REQUIRE(host.driver_of(bdf) == driver);
}

std::vector<std::string> step_names_of(const std::vector<CleaningStep>& steps) {
  std::vector<std::string> out;
  out.reserve(steps.size());
  for (const auto& step : steps) out.push_back(step.name);
  return out;
}

std::vector<std::string> step_names(const std::vector<std::pair<std::string, StepOutcome>>& steps) {
  std::vector<std::string> out;
  out.reserve(steps.size());
  for (const auto& step : steps) out.push_back(step.first);
  return out;
}

TEST_CASE("a GPU is reset and proved back, its ROM judged by the known-good list, its memory scrub marked undone") {
  CleaningFixture f;
  auto roms = testing::install_rom_model(f.host.kernel());
  roms->set(kGpu, gpu_vbios('a'));
  f.hygiene.firmware[{0x10de, 0x2330}] = {sha256_hex(gpu_vbios('a'))};
  const auto steps = f.clean(f.function(kGpu));
  CHECK(step_names(steps) == std::vector<std::string>{"reset", "firmware", "scrub"});
  CHECK(steps[0].second.result == StepResult::passed);
  CHECK_MESSAGE(contains(steps[0].second.detail, "answered as 10de:2330 after 1 read"), steps[0].second.detail);
  CHECK(f.host.drivers().resets(kGpu) == 1);
  CHECK(steps[1].second.result == StepResult::passed);
  CHECK(contains(steps[1].second.detail, sha256_hex(gpu_vbios('a'))));
  CHECK_FALSE(roms->enabled(kGpu));
  CHECK(steps[2].second.result == StepResult::skipped);
  CHECK(steps[2].second.detail == "not scrubbed: no scrubber configured");

  SUBCASE("a ROM off the list fails the cleaning, with its hash") {
    roms->set(kGpu, gpu_vbios('b'));
    const auto rewritten = f.clean(f.function(kGpu));
    REQUIRE(rewritten.size() == 2);
    CHECK(rewritten[1].second.result == StepResult::failed);
    CHECK(contains(rewritten[1].second.detail, sha256_hex(gpu_vbios('b'))));
    CHECK(contains(rewritten[1].second.detail, "not on the known-good list for 10de:2330"));
  }
  SUBCASE("no list for the device: its hash is kept, unjudged") {
    f.hygiene.firmware.clear();
    const auto unjudged = f.clean(f.function(kGpu));
    CHECK(unjudged[1].second.result == StepResult::skipped);
    CHECK(contains(unjudged[1].second.detail, sha256_hex(gpu_vbios('a'))));
    CHECK(contains(unjudged[1].second.detail, "no known-good list for 10de:2330"));
  }
}

TEST_CASE("a device that cannot be reset, or does not come back, fails its cleaning at the reset") {
  CleaningFixture f;
  testing::write_text_file(f.host.host("/sys/bus/pci/devices/" + kGpu + "/reset_method"), "\n");
  const auto none = f.clean(f.function(kGpu));
  REQUIRE(none.size() == 1);
  CHECK(none[0].second.result == StepResult::failed);
  CHECK(contains(none[0].second.detail, "no reset method"));

  testing::write_text_file(f.host.host("/sys/bus/pci/devices/" + kGpu + "/reset_method"), "flr\n");
  f.host.kernel().fail_write(".*/reset", EIO);
  const auto refused = f.clean(f.function(kGpu));
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].second.result == StepResult::failed);
}

TEST_CASE("a VF is read back neutral, and one left configured fails naming what is off") {
  CleaningFixture f;
  const auto& vf = f.first_vf();
  const auto steps = f.clean(vf);
  CHECK(step_names(steps) == std::vector<std::string>{"reset", "firmware", "vf-neutral"});
  CHECK(steps[1].second.result == StepResult::skipped);  // a VF has no ROM
  CHECK(steps[1].second.detail == "no expansion ROM");
  CHECK(steps[2].second.result == StepResult::passed);

  const auto* pf = f.model.find(*vf.physfn);
  auto& state = f.netlink.state(pf->net_interfaces.front(), 0);
  state.vlan = 100;
  state.trust = true;
  const auto configured = f.clean(vf);
  REQUIRE(configured.size() == 3);
  CHECK(configured[2].second.result == StepResult::failed);
  CHECK_MESSAGE(contains(configured[2].second.detail, "is not neutral: vlan 100, trust on"),
                configured[2].second.detail);
}

TEST_CASE("a tenant's NVMe is erased through the nvme driver and read back, outside the preparer's lock") {
  CleaningFixture f;
  REQUIRE(f.host.driver_of(kNvme) == "nvme");
  const std::string name = drive_nvme(f.host, kNvme, "live", {"ng9n1"});
  f.nvme_state.namespaces = {testing::fake_namespace(1)};
  f.nvme_state.write(1, 0, 0xa5);
  f.nvme_state.write(1, 1023, 0xa5);
  const auto steps = f.clean(f.function(kNvme));
  REQUIRE(step_names(steps) == std::vector<std::string>{"reset", "firmware", "erase"});
  CHECK(steps[2].second.result == StepResult::passed);
  CHECK(steps[2].second.detail ==
        "format (user data erase) of Fake NVMe; namespace 1: 16 blocks read back, all 0x00; through the nvme driver");
  CHECK(f.nvme_state.opened == std::vector<std::string>{"/dev/" + name});
  CHECK(f.nvme_state.namespace_devices == std::vector<std::string>{"/dev/ng9n1"});
  const auto listed = host_cleaning_steps(f.parts(), f.function(kNvme));
  CHECK_FALSE(listed.back().exclusive);

  SUBCASE("a block the erase did not reach fails it, naming the block") {
    f.nvme_state.write(1, 1023, 0xa5);
    f.nvme_state.forgotten = {1023};
    const auto kept = f.clean(f.function(kNvme));
    CHECK(kept[2].second.result == StepResult::failed);
    CHECK_MESSAGE(contains(kept[2].second.detail, "block 1023 of namespace 1 still holds data after the erase"),
                  kept[2].second.detail);
  }
  SUBCASE("a controller the driver does not bring up fails it, with the state it stayed in") {
    drive_nvme(f.host, kNvme, "resetting", {});
    const auto down = f.clean(f.function(kNvme));
    CHECK(down[2].second.result == StepResult::failed);
    CHECK(down[2].second.detail == "the nvme driver did not bring 0000:ad:00.0's controller up (its state: resetting)");
  }
  SUBCASE("a controller that offers no erase fails it: not erased is not clean") {
    f.nvme_state.info.oacs = 0;
    const auto none = f.clean(f.function(kNvme));
    CHECK(none[2].second.result == StepResult::failed);
    CHECK(contains(none[2].second.detail, "offers neither Sanitize"));
  }
}

// The wedge seen on the real kernel (issue 43): a controller given back to nvme a moment ago is
// being scanned, and a reset under the driver (nvme_reset_prepare/done) waits on that scan forever.
TEST_CASE("a device on a host driver is reset with no driver bound, then bound to that driver again") {
  CleaningFixture f;
  drive_nvme(f.host, kNvme, "live", {"ng9n1"});
  f.nvme_state.namespaces = {testing::fake_namespace(1)};
  const auto steps = f.clean(f.function(kNvme));
  REQUIRE(step_names(steps) == std::vector<std::string>{"reset", "firmware", "erase"});
  CHECK(steps[0].second.result == StepResult::passed);
  CHECK_MESSAGE(contains(steps[0].second.detail, "; off nvme for it, and back on it after"), steps[0].second.detail);
  CHECK(f.host.drivers().drivers_at_resets(kNvme) == std::vector<std::string>{""});
  CHECK(f.host.driver_of(kNvme) == "nvme");
  CHECK(steps[2].second.result == StepResult::passed);

  SUBCASE("one already off its driver is reset as it stands, and bound to nothing after") {
    REQUIRE(f.host.kernel().write("/sys/bus/pci/drivers/nvme/unbind", kNvme).ok());
    const auto unbound = f.clean(f.function(kNvme));
    CHECK(unbound[0].second.result == StepResult::passed);
    CHECK_FALSE(contains(unbound[0].second.detail, "off "));
    CHECK(f.host.driver_of(kNvme).empty());
  }
  SUBCASE("a reset that fails leaves it on no driver: nvme never scans what the tenant left") {
    f.host.kernel().fail_write(".*/reset", EIO);
    const auto broken = f.clean(f.function(kNvme));
    REQUIRE(broken.size() == 1);
    CHECK(broken[0].second.result == StepResult::failed);
    CHECK_MESSAGE(contains(broken[0].second.detail, "it stays on no driver rather than go back to nvme"),
                  broken[0].second.detail);
    CHECK(f.host.driver_of(kNvme).empty());
  }
}

// Issue 43, defect 1: cleaning is a reset, a format, a scrub; the host's own devices get none.
TEST_CASE("a device the host uses is never reset, erased or scrubbed: its cleaning fails naming the use") {
  CleaningFixture f;
  drive_nvme(f.host, kNvme, "live", {"ng9n1"});
  f.nvme_state.namespaces = {testing::fake_namespace(1)};
  const auto resets = f.host.drivers().resets(kNvme);

  SUBCASE("reserved by the operator") {
    f.reserved = {{*PciAddress::parse(kNvme), "reserved: the spare boot disk"}};
    const auto steps = f.clean(f.function(kNvme));
    REQUIRE(steps.size() == 1);
    CHECK(steps[0].second.result == StepResult::failed);
    CHECK(steps[0].second.detail ==
          "not run: the host uses 0000:ad:00.0 (reserved: the spare boot disk), and hostagent never resets, erases or "
          "scrubs a device the host uses");
  }
  SUBCASE("swapped on since the model was read") {
    const auto blocks = f.host.sysfs().list("/sys/class/block", true).value();
    std::string disk;
    for (const auto& name : blocks) {
      std::error_code ec;
      const auto target = std::filesystem::canonical(f.host.host("/sys/class/block/" + name), ec);
      if (!ec && contains(target.string(), kNvme) && name.find('p') == std::string::npos) disk = name;
    }
    REQUIRE_MESSAGE(!disk.empty(), (std::string("vela2 has no block device under ") + kNvme));
    std::ofstream(f.host.host("/proc/swaps"), std::ios::app) << "/dev/" << disk << " partition 8388604 0 -2\n";
    const auto steps = f.clean(f.function(kNvme));
    REQUIRE(steps.size() == 1);
    CHECK_MESSAGE(contains(steps[0].second.detail, "(" + disk + " is swap)"), steps[0].second.detail);
  }
  CHECK(f.host.drivers().resets(kNvme) == resets);
  CHECK(f.nvme_state.opened.empty());
  CHECK(f.host.driver_of(kNvme) == "nvme");
}

// Where hostagent keeps a tenant's controller (bound at start, left there by the VM): the erase
// drives it through VFIO by its IOMMU group, and no host driver ever binds it.
TEST_CASE("a tenant's NVMe on vfio-pci is erased through VFIO, by its IOMMU group, never given to nvme") {
  CleaningFixture f;
  rebind(f.host, kNvme, "vfio-pci");
  f.nvme_state.namespaces = {testing::fake_namespace(1)};
  f.nvme_state.write(1, 7, 0xa5);
  const auto steps = f.clean(f.function(kNvme));
  REQUIRE(step_names(steps) == std::vector<std::string>{"reset", "firmware", "erase"});
  CHECK(steps[2].second.result == StepResult::passed);
  CHECK(steps[2].second.detail ==
        "format (user data erase) of Fake NVMe; namespace 1: 16 blocks read back, all 0x00; "
        "through VFIO, on vfio-pci");
  CHECK(f.nvme_state.opened ==
        std::vector<std::string>{"vfio " + std::string(kNvme) + " in /dev/vfio/" + f.host.group_of(kNvme)});
  CHECK(f.host.driver_of(kNvme) == "vfio-pci");
  CHECK(f.host.drivers().drivers_at_resets(kNvme) == std::vector<std::string>{"vfio-pci"});
  for (const auto& write : f.host.kernel().writes()) {
    CHECK_MESSAGE(!contains(write.first, "/drivers/nvme/"), write.first << " <- " << write.second);
  }

  SUBCASE("a group another process holds open fails the erase with the kernel's word for it") {
    f.nvme_state.group_busy = true;
    const auto busy = f.clean(f.function(kNvme));
    CHECK(busy[2].second.result == StepResult::failed);
    CHECK_MESSAGE(contains(busy[2].second.detail, "open /dev/vfio/" + f.host.group_of(kNvme)), busy[2].second.detail);
    CHECK_MESSAGE(contains(busy[2].second.detail, "Device or resource busy"), busy[2].second.detail);
  }
}

TEST_CASE("an NVMe on another driver than nvme is not erased, and its cleaning fails saying why") {
  CleaningFixture f;
  REQUIRE(f.host.kernel().write("/sys/bus/pci/drivers/nvme/unbind", kNvme).ok());
  const auto steps = f.clean(f.function(kNvme));
  REQUIRE(steps.size() == 3);
  CHECK(steps[2].second.result == StepResult::failed);
  CHECK(steps[2].second.detail ==
        "0000:ad:00.0 is on no driver, neither vfio-pci nor the kernel's nvme driver, which hostagent erases and "
        "reads through");
  CHECK(f.nvme_state.opened.empty());
}

TEST_CASE("on a simulated libvirt-managed host every step is skipped with who does it, or that nothing does") {
  CleaningFixture f;
  const auto writes = f.host.kernel().writes().size();
  for (const auto* address : {&kGpu, &kNvme}) {
    for (const auto& step : libvirt_managed_cleaning_steps(f.function(*address), ManagedHost::simulated)) {
      const auto outcome = step.run();
      CAPTURE(step.name);
      CHECK(outcome.result == StepResult::skipped);
      CHECK_FALSE(outcome.detail.empty());
    }
  }
  CHECK(f.host.kernel().writes().size() == writes);
}

// Issue 44: nothing erases an NVMe under libvirt's managed hostdevs, so on a real host its erase
// fails (the daemon quarantines it) rather than free it as clean with the tenant's data on it.
TEST_CASE("on a real libvirt-managed host an NVMe's erase fails saying why and what to do, the rest skipped") {
  CleaningFixture f;
  const auto writes = f.host.kernel().writes().size();
  const auto gpu_steps = libvirt_managed_cleaning_steps(f.function(kGpu), ManagedHost::real);
  for (const auto& step : gpu_steps) CHECK(step.run().result == StepResult::skipped);
  const auto steps = libvirt_managed_cleaning_steps(f.function(kNvme), ManagedHost::real);
  REQUIRE(step_names_of(steps) == std::vector<std::string>{"reset", "firmware", "erase"});
  const auto erase = steps[2].run();
  CHECK(erase.result == StepResult::failed);
  CHECK_MESSAGE(contains(erase.detail, "not erased: under devices.preparation libvirt nothing erases an NVMe"),
                erase.detail);
  CHECK_MESSAGE(contains(erase.detail, "set devices.preparation: hostagent"), erase.detail);
  CHECK(f.nvme_state.opened.empty());
  CHECK(f.host.kernel().writes().size() == writes);
}

// A script the test writes: the scrubber as an operator would install it.
std::string scrubber(const TempDir& dir, const std::string& name, const std::string& body) {
  const auto file = dir.path() / name;
  testing::write_text_file(file, "#!/bin/sh\n" + body + "\n");
  std::filesystem::permissions(file, std::filesystem::perms::owner_all);
  return file.string();
}

// Through the driver core's files, as vfio/ binds: unbind, driver_override, drivers_probe.
StepOutcome scrub_of(CleaningFixture& f) {
  const auto steps = f.clean(f.function(kGpu));
  REQUIRE(steps.size() == 3);
  REQUIRE(steps[2].first == "scrub");
  return steps[2].second;
}

TEST_CASE("a GPU's scrubber runs with its address, while the GPU is on vfio-pci, and its exit status decides") {
  CleaningFixture f;
  TempDir dir;
  const auto seen = dir.path() / "seen";
  f.hygiene.gpu_scrub = {scrubber(dir, "scrub-ok", "echo \"$1\" > " + seen.string() + "; echo wiped"), "{address}"};
  rebind(f.host, kGpu, "vfio-pci");
  const auto ok = scrub_of(f);
  CHECK(ok.result == StepResult::passed);
  CHECK_MESSAGE(contains(ok.detail, "(exit status 0); it said: wiped"), ok.detail);
  CHECK(testing::read_text_file(seen) == kGpu + "\n");

  SUBCASE("a status other than 0 fails, with what it said") {
    // Two lines and a byte that is not UTF-8: the evidence holds one line of text.
    f.hygiene.gpu_scrub = {scrubber(dir, "scrub-bad", "printf 'ECC error\\nbank 3 \\377' >&2; exit 3")};
    const auto bad = scrub_of(f);
    CHECK(bad.result == StepResult::failed);
    CHECK_MESSAGE(contains(bad.detail, "exited with status 3; it said: ECC error bank 3 \\xff"), bad.detail);
  }
  SUBCASE("past its time limit it is killed, and fails") {
    f.hygiene.gpu_scrub = {scrubber(dir, "scrub-slow", "sleep 30")};
    f.hygiene.gpu_scrub_timeout = std::chrono::milliseconds(200);
    const auto slow = scrub_of(f);
    CHECK(slow.result == StepResult::failed);
    CHECK_MESSAGE(contains(slow.detail, "did not finish within"), slow.detail);
  }
  SUBCASE("a scrubber that is not there fails, naming it") {
    f.hygiene.gpu_scrub = {(dir.path() / "missing").string()};
    const auto missing = scrub_of(f);
    CHECK(missing.result == StepResult::failed);
    CHECK_MESSAGE(contains(missing.detail, "could not be started"), missing.detail);
  }
  SUBCASE("a GPU on a host driver is not scrubbed, and fails") {
    rebind(f.host, kGpu, "nvidia");
    const auto elsewhere = scrub_of(f);
    CHECK(elsewhere.result == StepResult::failed);
    CHECK_MESSAGE(contains(elsewhere.detail, "the GPU is on nvidia, not vfio-pci"), elsewhere.detail);
  }
}

}  // namespace
}  // namespace hostagent::devices
