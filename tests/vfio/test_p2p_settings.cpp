// Peer-to-peer settings (Vela's ACS/ATS) on simulated hosts: libpci writes the fixture's config files,
// which are plain 4096-byte files, so what is written reads back as on a kernel that takes it.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "fake_kernel.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "hostagent/vfio/config_space_access.hpp"
#include "hostagent/vfio/p2p_settings.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::vfio {
namespace {

using Register = RegisterChange::Register;

numa::PciAddress at(const char* text) {
  return numa::PciAddress::parse(text).value();
}

// vela2, stack 0x15 (simhost/src/sim_host.cpp): root port 15:02.0, switch upstream 16:00.0,
// downstream 17:00.0 (-> H100 18:00.0), 17:01.0 (-> ConnectX-7 19:00.0, VFs 19:00.1-4), 17:02.0
// (-> NVMe 1a:00.0). Linux's ACS default on the ports (0x1d), ATS off everywhere.
const numa::PciAddress kStackRootPort = at("0000:15:02.0");
const numa::PciAddress kUpstream = at("0000:16:00.0");
const numa::PciAddress kGpuPort = at("0000:17:00.0");
const numa::PciAddress kNicPort = at("0000:17:01.0");
const numa::PciAddress kNvmePort = at("0000:17:02.0");
const numa::PciAddress kStackGpu = at("0000:18:00.0");
const numa::PciAddress kNic = at("0000:19:00.0");
const numa::PciAddress kVf1 = at("0000:19:00.1");
const numa::PciAddress kVf2 = at("0000:19:00.2");
constexpr int kExtCapAcs = 0x0d;

struct Host {
  testing::TempDir dir;
  numa::HostModel model;
  std::unique_ptr<ConfigSpace> config;
  explicit Host(const std::string& name) : model(testing::discover_simulated(name, dir)) {
    auto made = make_libpci_config_space(dir.path());
    REQUIRE_MESSAGE(made.ok(), made.error().message);
    config = std::move(made).value();
  }
  std::map<std::string, std::string> snapshot() const { return testing::snapshot_tree(dir.path()); }
  // A second, independent reader: the host as discovery (numa's libpci reader) now sees it.
  numa::HostModel rediscover() const { return discovery::discover_from_sysfs(dir.path()).value(); }
};

// A ConfigSpace over another that fails the Nth write, or keeps some bits as they are on every write
// (read-only or hardwired bits: the write succeeds all the same, PCIe Base Spec 7.4).
class FaultyConfigSpace final : public ConfigSpace {
 public:
  explicit FaultyConfigSpace(ConfigSpace& inner) : inner_(inner) {}
  int fail_write = 0;
  uint16_t read_only = 0;
  int writes = 0;

  Result<uint16_t> read16(const numa::PciAddress& device, int offset) override { return inner_.read16(device, offset); }
  Status write16(const numa::PciAddress& device, int offset, uint16_t value) override {
    if (++writes == fail_write) {
      return Error{ErrorCode::io_error,
                   "injected failure of write " + std::to_string(writes) + " to " + device.to_string()};
    }
    if (read_only == 0) return inner_.write16(device, offset, value);
    HA_TRY(const uint16_t now, inner_.read16(device, offset));
    return inner_.write16(device, offset, static_cast<uint16_t>((value & ~read_only) | (now & read_only)));
  }
  Result<std::optional<int>> find_ext_capability(const numa::PciAddress& device, int cap_id) override {
    return inner_.find_ext_capability(device, cap_id);
  }

 private:
  ConfigSpace& inner_;
};

using hostagent::testing::contains;

int acs_offset(ConfigSpace& config, const numa::PciAddress& port) {
  const auto cap = config.find_ext_capability(port, kExtCapAcs).value();
  REQUIRE(cap.has_value());
  return *cap;
}

// Whether every register of a p2p_needs list holds the setting already: nothing left to write.
bool all_held(const std::vector<RegisterChange>& needs) {
  return std::all_of(needs.begin(), needs.end(), [](const RegisterChange& c) { return c.before == c.after; });
}

TEST_CASE("a VM's GPU and NIC: the plan sets ACS on the root and downstream ports above them and ATS on both") {
  Host host("vela2");
  const auto before = host.snapshot();
  const auto plan = p2p_needs(host.model, {kStackGpu, kNic}, *host.config).value();
  const std::vector<RegisterChange> expected{{kStackRootPort, Register::acs_control, 0x001d, 0x005d},
                                             {kGpuPort, Register::acs_control, 0x001d, 0x005d},
                                             {kNicPort, Register::acs_control, 0x001d, 0x005d},
                                             {kStackGpu, Register::ats_control, 0x0000, 0x8000},
                                             {kNic, Register::ats_control, 0x0000, 0x8000}};
  CHECK(plan == expected);  // not the switch's upstream port, not the NVMe's port
  // Planning reads only.
  CHECK(testing::describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("apply sets the registers the plan names and restore returns every config file byte for byte") {
  Host host("vela2");
  const auto before = host.snapshot();
  const auto plan = p2p_needs(host.model, {kStackGpu, kNic}, *host.config).value();
  const auto applied = apply_p2p(*host.config, plan);
  REQUIRE_MESSAGE(applied.ok(), applied.error().message);
  CHECK(*applied == plan);

  const auto changed = host.rediscover();
  for (const auto& port : {kStackRootPort, kGpuPort, kNicPort}) CHECK(changed.find(port)->acs->control == 0x005d);
  CHECK(changed.find(kNvmePort)->acs->control == 0x001d);
  CHECK(changed.find(kStackGpu)->ats->enabled);
  CHECK(changed.find(kNic)->ats->enabled);
  CHECK_FALSE(changed.find(kVf1)->ats->enabled);
  // Exactly the five config files changed.
  const auto after = host.snapshot();
  std::set<std::string> changed_files;
  for (const auto& [path, what] : after) {
    if (before.at(path) == what) continue;
    CHECK(std::filesystem::path(path).filename() == "config");
    changed_files.insert(std::filesystem::path(path).parent_path().filename().string());
  }
  CHECK(changed_files == std::set<std::string>{kStackRootPort.to_string(), kGpuPort.to_string(), kNicPort.to_string(),
                                               kStackGpu.to_string(), kNic.to_string()});

  const auto restored = restore_p2p(*host.config, *applied);
  REQUIRE_MESSAGE(restored.ok(), restored.error().message);
  CHECK(testing::describe_difference(before, host.snapshot()) == "");
}

TEST_CASE("applying twice changes nothing the second time") {
  Host host("vela2");
  const auto plan = p2p_needs(host.model, {kStackGpu, kNic}, *host.config).value();
  REQUIRE(apply_p2p(*host.config, plan).ok());
  const auto after_first = host.snapshot();
  CHECK(all_held(p2p_needs(host.model, {kStackGpu, kNic}, *host.config).value()));
  // The same plan again (a journal replay after a crash): every register is at `after` already.
  FaultyConfigSpace counting(*host.config);
  const auto again = apply_p2p(counting, plan);
  REQUIRE(again.ok());
  CHECK(again->empty());
  CHECK(counting.writes == 0);
  CHECK(testing::describe_difference(after_first, host.snapshot()) == "");
}

TEST_CASE("a write failing at any step leaves config space exactly as it was") {
  Host host("vela2");
  const auto before = host.snapshot();
  const auto plan = p2p_needs(host.model, {kStackGpu, kNic, kVf1}, *host.config).value();
  REQUIRE(plan.size() == 6);
  for (int n = 1; n <= static_cast<int>(plan.size()); ++n) {
    CAPTURE(n);
    FaultyConfigSpace faulty(*host.config);
    faulty.fail_write = n;
    const auto applied = apply_p2p(faulty, plan);
    REQUIRE_FALSE(applied.ok());
    CHECK(contains(applied.error().message, "injected failure of write " + std::to_string(n)));
    CHECK(faulty.writes > n - 1);  // the rollback wrote back the n - 1 registers before the failure
    CHECK(testing::describe_difference(before, host.snapshot()) == "");
  }
}

TEST_CASE("a register that does not take the value is an error naming the device, the register and the values") {
  Host host("vela2");
  const auto before = host.snapshot();
  const auto plan = p2p_needs(host.model, {kStackGpu}, *host.config).value();
  FaultyConfigSpace dropping(*host.config);
  dropping.read_only = kAcsDirectTranslated;  // a port whose DT enable is hardwired to 0
  const auto applied = apply_p2p(dropping, plan);
  REQUIRE_FALSE(applied.ok());
  const std::string& message = applied.error().message;
  CHECK(contains(message, "ACS control of " + kStackRootPort.to_string()));
  CHECK(contains(message, "did not take 0x005d"));
  CHECK(contains(message, "reads 0x001d"));
  CHECK(testing::describe_difference(before, host.snapshot()) == "");
}

TEST_CASE("a partly taken write is rolled back with the registers before it") {
  Host host("vela2");
  // The GPU's port has Translation Blocking on, and (in this test) stuck on: DT takes, TB does
  // not, and the port reads 0x5f, neither before nor after. It must be put back too.
  REQUIRE(host.config->write16(kGpuPort, acs_offset(*host.config, kGpuPort) + 6, 0x001f).ok());
  const auto before = host.snapshot();
  const auto plan = p2p_needs(host.model, {kStackGpu}, *host.config).value();
  REQUIRE(plan.size() == 3);
  REQUIRE(plan[1] == RegisterChange{kGpuPort, Register::acs_control, 0x001f, 0x005d});
  FaultyConfigSpace dropping(*host.config);
  dropping.read_only = kAcsTranslationBlocking;
  const auto applied = apply_p2p(dropping, plan);
  REQUIRE_FALSE(applied.ok());
  CHECK(contains(applied.error().message, "ACS control of " + kGpuPort.to_string() + " did not take 0x005d"));
  CHECK(contains(applied.error().message, "reads 0x005f"));
  CHECK_FALSE(contains(applied.error().message, "rolling back"));
  CHECK(testing::describe_difference(before, host.snapshot()) == "");
}

TEST_CASE("a register someone else changed since the plan is a conflict, and nobody's value is overwritten") {
  Host host("vela2");
  const auto plan = p2p_needs(host.model, {kStackGpu, kNic}, *host.config).value();
  REQUIRE(host.config->write16(kNicPort, acs_offset(*host.config, kNicPort) + 6, 0x0011).ok());
  const auto before = host.snapshot();
  const auto applied = apply_p2p(*host.config, plan);
  REQUIRE_FALSE(applied.ok());
  CHECK(applied.error().code == ErrorCode::conflict);
  CHECK(contains(applied.error().message, kNicPort.to_string()));
  CHECK(testing::describe_difference(before, host.snapshot()) == "");
  CHECK(host.config->read16(kNicPort, acs_offset(*host.config, kNicPort) + 6).value() == 0x0011);
}

TEST_CASE("restore goes on past a register it cannot write and names it") {
  Host host("vela2");
  const auto before = host.snapshot();
  const auto plan = p2p_needs(host.model, {kStackGpu, kNic}, *host.config).value();
  const auto applied = apply_p2p(*host.config, plan).value();
  FaultyConfigSpace faulty(*host.config);
  faulty.fail_write = 1;  // restore goes last first: the NIC's ATS control
  const auto restored = restore_p2p(faulty, applied);
  REQUIRE_FALSE(restored.ok());
  CHECK(contains(restored.error().message, kNic.to_string()));
  CHECK(faulty.writes == static_cast<int>(applied.size()));
  const auto model = host.rediscover();
  CHECK(model.find(kNic)->ats->enabled);
  CHECK_FALSE(model.find(kStackGpu)->ats->enabled);
  for (const auto& port : {kStackRootPort, kGpuPort, kNicPort}) CHECK(model.find(port)->acs->control == 0x001d);
  // Once the write goes through, the host is as it was.
  REQUIRE(restore_p2p(*host.config, applied).ok());
  CHECK(testing::describe_difference(before, host.snapshot()) == "");
}

TEST_CASE("two VMs with VFs of one NIC share its ports, which are restored only after both let go") {
  Host host("vela2");
  const auto before = host.snapshot();
  P2pLedger ledger;

  const auto needs_a = p2p_needs(host.model, {kVf1}, *host.config).value();
  REQUIRE(apply_p2p(*host.config, needs_a).ok());
  ledger.acquire("vm-a", needs_a);
  // B finds the ports set already: it writes only its own VF, yet it needs the ports too.
  const auto needs_b = p2p_needs(host.model, {kVf2}, *host.config).value();
  const auto written_b = apply_p2p(*host.config, needs_b);
  REQUIRE(written_b.ok());
  REQUIRE(written_b->size() == 1);
  CHECK((*written_b)[0].device == kVf2);
  CHECK(needs_b.size() > written_b->size());
  ledger.acquire("vm-b", needs_b);
  const auto& shared = ledger.entries().at({kNicPort, Register::acs_control});
  CHECK(shared.users == std::set<std::string>{"vm-a", "vm-b"});
  CHECK(shared.change.before == 0x001d);  // the host's own value, not what B found

  const auto released_a = ledger.release("vm-a");
  CHECK(released_a == std::vector<RegisterChange>{{kVf1, Register::ats_control, 0x0000, 0x8000}});
  REQUIRE(restore_p2p(*host.config, released_a).ok());
  const auto between = host.rediscover();
  CHECK(between.find(kNicPort)->acs->control == 0x005d);
  CHECK(between.find(kStackRootPort)->acs->control == 0x005d);
  CHECK(between.find(kVf2)->ats->enabled);

  const auto released_b = ledger.release("vm-b");
  REQUIRE(released_b.size() == 3);  // B's VF, then the ports, last taken first
  CHECK(released_b[0].device == kVf2);
  CHECK(released_b[2].device == kStackRootPort);
  REQUIRE(restore_p2p(*host.config, released_b).ok());
  CHECK(ledger.entries().empty());
  CHECK(testing::describe_difference(before, host.snapshot()) == "");
}

TEST_CASE("a ledger rebuilt in another order still restores the host's own values") {
  // After a restart the daemon replays each VM's recorded needs; B's (taken after A had set the
  // port) may come first.
  const RegisterChange a{kNicPort, Register::acs_control, 0x001d, 0x005d};
  const RegisterChange b{kNicPort, Register::acs_control, 0x005d, 0x005d};
  P2pLedger ledger;
  ledger.acquire("vm-b", {b});
  ledger.acquire("vm-a", {a});
  CHECK(ledger.release("vm-b").empty());
  CHECK(ledger.release("vm-a") == std::vector<RegisterChange>{a});
  // A register nobody changed is dropped without a restore.
  ledger.acquire("vm-b", {b});
  CHECK(ledger.release("vm-b").empty());
  CHECK(ledger.entries().empty());
}

TEST_CASE("bits the ACS capability does not advertise are never set") {
  for (uint32_t capability = 0; capability <= 0xffff; ++capability) {
    const auto cap = static_cast<uint16_t>(capability);
    const uint16_t from_zero = vela_acs_control(cap, 0x0000);
    REQUIRE((from_zero & ~cap) == 0);
    REQUIRE(from_zero == (cap & kAcsVelaControl));
    // Bits above Vela's seven are the host's: kept as they are.
    REQUIRE((vela_acs_control(cap, 0xff80) & 0xff80) == 0xff80);
  }
  Host host("vela2");
  // The fixture's ports advertise SV TB RR CR UF DT (0x5f); make the root port advertise SV, RR,
  // CR, UF only and the GPU's port Source Validation only, with nothing enabled.
  const int root_acs = acs_offset(*host.config, kStackRootPort);
  const int gpu_port_acs = acs_offset(*host.config, kGpuPort);
  REQUIRE(host.config->write16(kStackRootPort, root_acs + 4, 0x001d).ok());
  REQUIRE(host.config->write16(kGpuPort, gpu_port_acs + 4, 0x0001).ok());
  REQUIRE(host.config->write16(kGpuPort, gpu_port_acs + 6, 0x0000).ok());
  const auto plan = p2p_needs(host.model, {kStackGpu}, *host.config).value();
  // The root port already holds all it can (no DT to enable): needed, with nothing to write.
  const std::vector<RegisterChange> expected{{kStackRootPort, Register::acs_control, 0x001d, 0x001d},
                                             {kGpuPort, Register::acs_control, 0x0000, 0x0001},
                                             {kStackGpu, Register::ats_control, 0x0000, 0x8000}};
  CHECK(plan == expected);
}

TEST_CASE("Translation Blocking and Egress Control are cleared, as Vela's 0x5d does") {
  CHECK(vela_acs_control(0x007f, 0x007f) == 0x005d);
  CHECK(vela_acs_control(0x007f, 0x0002) == 0x005d);
}

TEST_CASE("current_state decodes what the fixture holds, before and after the setting") {
  Host host("vela2");
  auto find = [](const std::vector<P2pState>& states, const numa::PciAddress& address) -> const P2pState* {
    for (const auto& s : states) {
      if (s.device == address) return &s;
    }
    return nullptr;
  };
  const auto initial = current_state(host.model, *host.config).value();
  const P2pState* port = find(initial, kGpuPort);
  REQUIRE(port != nullptr);
  CHECK(port->acs_capability == uint16_t{0x005f});
  CHECK(port->acs_enabled == std::vector<std::string>{"SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"});
  CHECK_FALSE(port->ats_enabled.has_value());
  const P2pState* gpu = find(initial, kStackGpu);
  REQUIRE(gpu != nullptr);
  CHECK_FALSE(gpu->acs_control.has_value());
  CHECK(gpu->ats_enabled == false);
  // Neither ACS nor ATS: the switch's upstream port, the NVMe drive, the host bridge.
  CHECK(find(initial, kUpstream) == nullptr);
  CHECK(find(initial, at("0000:1a:00.0")) == nullptr);
  CHECK(find(initial, at("0000:15:00.0")) == nullptr);

  REQUIRE(apply_p2p(*host.config, p2p_needs(host.model, {kStackGpu}, *host.config).value()).ok());
  const auto set = current_state(host.model, *host.config).value();
  CHECK(find(set, kGpuPort)->acs_enabled ==
        std::vector<std::string>{"SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"});
  CHECK(find(set, kStackGpu)->ats_enabled == true);
  CHECK(find(set, kNic)->ats_enabled == false);
  CHECK(find(set, kNicPort)->acs_control == uint16_t{0x001d});
}

TEST_CASE("an unknown device or a bridge is refused before anything is read") {
  Host host("vela2");
  const auto unknown = p2p_needs(host.model, {at("0000:ee:00.0")}, *host.config);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == ErrorCode::not_found);
  CHECK(contains(unknown.error().message, "0000:ee:00.0"));
  const auto bridge = p2p_needs(host.model, {kGpuPort}, *host.config);
  REQUIRE_FALSE(bridge.ok());
  CHECK(bridge.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("libpci config space: unreadable files, short files and bad offsets are errors or absences") {
  Host host("vela2");
  const auto config_file = host.dir.path() / "sys/bus/pci/devices" / kStackGpu.to_string() / "config";
  CHECK(host.config->read16(kStackGpu, 0).value() == 0x10de);  // NVIDIA's vendor id
  const auto odd = host.config->read16(kStackGpu, 3);
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == ErrorCode::invalid_argument);
  CHECK_FALSE(host.config->write16(kStackGpu, 0x1000, 0).ok());

  // A conventional function's config file is 256 bytes: no extended capabilities, no error.
  std::filesystem::resize_file(config_file, 256);
  const auto no_ext = host.config->find_ext_capability(kStackGpu, kExtCapAcs);
  REQUIRE(no_ext.ok());
  CHECK_FALSE(no_ext->has_value());
  CHECK_FALSE(host.config->read16(kStackGpu, 0x106).ok());

  std::filesystem::remove(config_file);
  const auto gone = host.config->find_ext_capability(kStackGpu, kExtCapAcs);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == ErrorCode::not_found);
  CHECK(contains(gone.error().message, config_file.string()));
  const auto plan = p2p_needs(host.model, {kStackGpu}, *host.config);
  REQUIRE_FALSE(plan.ok());
  CHECK(contains(plan.error().message, kStackGpu.to_string()));
}

TEST_CASE("a port without ACS and a device without ATS are left out of the plan") {
  auto spec = simhost::builtin_host("quirks").value();
  for (auto& f : spec.functions) {
    if (f.address == "0000:82:00.0") f.acs = false;  // the A100's downstream port
    if (f.address == "0000:83:00.0") f.ats = false;  // the A100
  }
  testing::TempDir dir;
  REQUIRE(simhost::write_sysfs_tree(spec, dir.path()).ok());
  const auto model = discovery::discover_from_sysfs(dir.path()).value();
  auto config = make_libpci_config_space(dir.path()).value();
  const auto plan = p2p_needs(model, {at("0000:83:00.0"), at("0000:84:00.0")}, *config).value();
  const std::vector<RegisterChange> expected{{at("0000:80:02.0"), Register::acs_control, 0x001d, 0x005d},
                                             {at("0000:82:01.0"), Register::acs_control, 0x001d, 0x005d},
                                             {at("0000:84:00.0"), Register::ats_control, 0x0000, 0x8000}};
  CHECK(plan == expected);
}

}  // namespace
}  // namespace hostagent::vfio
