// hostagent's own device preparation (daemon/host_device_preparer, daemon/host_preparation) on the
// simulated Vela-2-like host, through the fake kernel's PCI driver core, the fixture's config files
// (libpci) and an in-memory netlink: what a prepare changes, that a release or a failure at any step
// leaves the tree exactly as it was, the registers two VMs share, a restart in between, and the
// host's own preparation at start.
#include <doctest/doctest.h>

#include <fstream>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "binder_options.hpp"
#include "fake_host.hpp"
#include "fake_sriov.hpp"
#include "fake_vf_netlink.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/devices/device_records.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/vfio/p2p_settings.hpp"
#include "test_support.hpp"

namespace hostagent::devices {
namespace {

namespace fs = std::filesystem;
using sriov::fake::FakeVfNetlink;
using testing::builtin_spec;
using testing::describe_difference;
using testing::FakeHost;
using testing::FakeKernel;
using testing::TempDir;

using hostagent::testing::kGiB;

using hostagent::testing::contains;

// The preparer owns its writer, config space and netlink; the fixture keeps the real ones, so these
// forward to them.
class ForwardingWriter final : public SysfsWriter {
 public:
  explicit ForwardingWriter(SysfsWriter& inner) : inner_(inner) {}
  Status write(const std::string& kernel_path, std::string_view value) override {
    return inner_.write(kernel_path, value);
  }
  const fs::path& root() const override { return inner_.root(); }

 private:
  SysfsWriter& inner_;
};

class ForwardingNetlink final : public sriov::VfNetlink {
 public:
  explicit ForwardingNetlink(sriov::VfNetlink& inner) : inner_(inner) {}
  Result<sriov::VfState> read(const std::string& pf, int vf) override { return inner_.read(pf, vf); }
  Status apply(const std::string& pf, int vf, const sriov::VfSettings& s) override { return inner_.apply(pf, vf, s); }

 private:
  sriov::VfNetlink& inner_;
};

// Counts config-space accesses and fails the Nth write or read when asked (0: none).
struct ConfigCounters {
  int writes = 0;
  int reads = 0;
  int fail_write = 0;
  int fail_read = 0;
};

class CountingConfigSpace final : public vfio::ConfigSpace {
 public:
  CountingConfigSpace(std::unique_ptr<vfio::ConfigSpace> inner, ConfigCounters& counters)
      : inner_(std::move(inner)), counters_(counters) {}
  Result<uint16_t> read16(const numa::PciAddress& device, int offset) override {
    if (++counters_.reads == counters_.fail_read) {
      return Error{ErrorCode::io_error, "injected failure of config read of " + device.to_string()};
    }
    return inner_->read16(device, offset);
  }
  Status write16(const numa::PciAddress& device, int offset, uint16_t value) override {
    if (++counters_.writes == counters_.fail_write) {
      return Error{ErrorCode::io_error, "injected failure of config write to " + device.to_string()};
    }
    return inner_->write16(device, offset, value);
  }
  Result<std::optional<int>> find_ext_capability(const numa::PciAddress& device, int cap_id) override {
    return inner_->find_ext_capability(device, cap_id);
  }

 private:
  std::unique_ptr<vfio::ConfigSpace> inner_;
  ConfigCounters& counters_;
};

numa::HostModel discover(const FakeHost& host) {
  auto model = discovery::discover_from_sysfs(host.root());
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  return std::move(model).value();
}

// VF settings away from neutral everywhere, so that a reset that forgot one shows.
PreparationOptions configured_options() {
  PreparationOptions options;
  options.vf_defaults.vlan = 100;
  options.vf_defaults.qos = 3;
  options.vf_defaults.trust = true;
  options.vf_defaults.spoofchk = false;
  options.vf_defaults.link_state = sriov::LinkState::enable;
  options.vf_defaults.max_tx_rate_mbps = 25000;
  return options;
}

// One vela2 host and everything a preparer works through. Building the tree takes about a second:
// cases share one where they can, which is sound because each checks the tree is back as it was.
struct Fixture {
  explicit Fixture(const std::function<void(FakeKernel&)>& before_model = {}, const std::string& name = "vela2")
      : host(builtin_spec(name), before_model), model(discover(host)) {
    for (const auto& f : model.pci_devices) {
      if (f.sriov && !f.net_interfaces.empty()) {
        netlink.add_pf(f.net_interfaces.front(), static_cast<int>(f.sriov->vfs.size()));
      }
    }
  }

  HostDeviceParts parts() {
    HostDeviceParts parts;
    parts.sysfs_root = host.root();
    parts.writer = std::make_unique<ForwardingWriter>(host.kernel());
    auto config = vfio::make_libpci_config_space(host.root());
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    parts.config_space = std::make_unique<CountingConfigSpace>(std::move(config).value(), config_counters);
    parts.netlink = std::make_unique<ForwardingNetlink>(netlink);
    parts.options = options;
    parts.records_directory = records_dir.path() / "devices";
    return parts;
  }

  std::unique_ptr<DevicePreparer> preparer(const numa::HostModel& on) {
    auto made = make_host_device_preparer(on, parts());
    REQUIRE_MESSAGE(made.ok(), made.error().message);
    return std::move(made).value();
  }
  std::unique_ptr<DevicePreparer> preparer() { return preparer(model); }

  DeviceRecords records() const { return DeviceRecords::open(records_dir.path() / "devices").value(); }
  std::optional<DeviceRecord> record(const std::string& owner) const {
    auto read = records().read(owner);
    REQUIRE_MESSAGE(read.ok(), read.error().message);
    return std::move(read).value();
  }

  // The PF netdev and index of a VF, from the model.
  std::pair<std::string, int> vf_place(const numa::PciAddress& vf) const {
    const auto* pf = model.find(*model.find(vf)->physfn);
    const auto& vfs = pf->sriov->vfs;
    return {pf->net_interfaces.front(), static_cast<int>(std::find(vfs.begin(), vfs.end(), vf) - vfs.begin())};
  }
  sriov::VfState vf_state(const numa::PciAddress& vf) {
    const auto [pf, index] = vf_place(vf);
    return netlink.state(pf, index);
  }
  // Every VF of the host at the state a freshly created VF has.
  void check_netlink_neutral() {
    for (const auto& f : model.pci_devices) {
      if (!f.physfn) continue;
      CHECK_MESSAGE(vf_state(f.address) == FakeVfNetlink::fresh(), f.address.to_string() << " is not neutral");
    }
  }

  std::size_t writes() { return host.kernel().writes().size(); }

  FakeHost host;
  numa::HostModel model;
  FakeVfNetlink netlink;
  ConfigCounters config_counters;
  PreparationOptions options = configured_options();
  TempDir records_dir;
};

numa::PlacementRequest gpu_request(int gpus, int vfs_per_gpu, int nvme) {
  numa::PlacementRequest request;
  request.vcpus = 8;
  request.memory_bytes = 16 * kGiB;
  request.gpus = gpus;
  request.vfs_per_gpu = vfs_per_gpu;
  request.nvme = nvme;
  request.peer_to_peer = true;  // alone on the host, every port above its GPUs and NICs is relaxed
  return request;
}

numa::Placement place(const numa::HostModel& model, const numa::PlacementRequest& request,
                      const std::vector<numa::Allocation>& existing = {}) {
  numa::HostPolicy policy;
  policy.housekeeping_cpus = {0, 96};
  auto placed = numa::place(model, existing, policy, request);
  REQUIRE_MESSAGE(placed.ok(), placed.error().message);
  return std::move(placed).value();
}

DeviceRequest request_for(const numa::Placement& placement) {
  DeviceRequest request;
  int n = 0;
  for (const auto& vf : numa::placed_vfs(placement)) {
    request.vf_macs.emplace_back(vf, MacAddress::parse("52:54:00:00:10:0" + std::to_string(++n), "mac").value());
  }
  return request;
}

// Every endpoint of the IOMMU groups the placement's devices are in.
std::set<numa::PciAddress> group_endpoints(const numa::HostModel& model, const numa::Placement& placement) {
  std::vector<numa::PciAddress> devices = numa::placed_vfs(placement);
  for (const auto& gpu : placement.gpus) {
    devices.push_back(gpu.gpu.address);
    devices.insert(devices.end(), gpu.companions.begin(), gpu.companions.end());
  }
  for (const auto& nvme : placement.nvme) devices.push_back(nvme.address);
  std::set<numa::PciAddress> out;
  for (const auto& device : devices) {
    const int group = model.find(device)->iommu_group.value();
    for (const auto& g : model.iommu_groups) {
      if (g.id != group) continue;
      for (const auto& member : g.members) {
        if (!model.find(member)->is_bridge()) out.insert(member);
      }
    }
  }
  return out;
}

// The devices peer-to-peer runs between (GPUs and VFs) and the ports above them Vela's ACS setting
// is for: root ports and switch downstream ports.
std::vector<numa::PciAddress> peer_devices(const numa::Placement& placement) {
  std::vector<numa::PciAddress> out = numa::placed_vfs(placement);
  for (const auto& gpu : placement.gpus) out.push_back(gpu.gpu.address);
  return out;
}
std::set<numa::PciAddress> acs_ports(const numa::HostModel& model, const std::vector<numa::PciAddress>& devices) {
  std::set<numa::PciAddress> out;
  for (const auto& device : devices) {
    for (const auto& bridge : model.find(device)->bridge_chain) {
      const auto role = model.find(bridge)->role;
      if (role == numa::PciRole::root_port || role == numa::PciRole::switch_downstream) out.insert(bridge);
    }
  }
  return out;
}

// What a prepare must have done, read back from the tree, the netlink fake and the records.
void check_prepared(Fixture& f, const std::string& vm, const numa::Placement& placement, const DeviceRequest& request) {
  for (const auto& endpoint : group_endpoints(f.model, placement)) {
    CHECK_MESSAGE(f.host.driver_of(endpoint.to_string()) == "vfio-pci", endpoint.to_string());
    CHECK(f.host.exists("/dev/vfio/" + std::to_string(*f.model.find(endpoint)->iommu_group)));
  }
  for (const auto& [vf, mac] : request.vf_macs) {
    const auto state = f.vf_state(vf);
    CHECK(state.mac == mac);
    CHECK(state.vlan == f.options.vf_defaults.vlan);
    CHECK(state.qos == f.options.vf_defaults.qos);
    CHECK(state.trust == f.options.vf_defaults.trust);
    CHECK(state.spoofchk == f.options.vf_defaults.spoofchk);
    CHECK(state.link_state == sriov::LinkState::enable);
    CHECK(state.max_tx_rate_mbps == f.options.vf_defaults.max_tx_rate_mbps);
  }
  const auto now = discover(f.host);
  const auto peers = peer_devices(placement);
  const auto ports = acs_ports(f.model, peers);
  CHECK(std::set<numa::PciAddress>(placement.p2p_ports.begin(), placement.p2p_ports.end()) == ports);
  for (const auto& port : ports) {
    const auto& was = *f.model.find(port)->acs;
    CHECK_MESSAGE(now.find(port)->acs->control == vfio::vela_acs_control(was.capability, was.control),
                  port.to_string());
    CHECK(now.find(port)->acs->control != was.control);  // vela2's ports start at Linux's 0x1d
  }
  for (const auto& device : peers) {
    REQUIRE(now.find(device)->ats.has_value());
    CHECK_MESSAGE(now.find(device)->ats->enabled, device.to_string());
  }
  const auto record = f.record(vm);
  REQUIRE(record.has_value());
  CHECK(record->vfs.size() == request.vf_macs.size());
  std::set<int> groups;
  for (const auto& endpoint : group_endpoints(f.model, placement)) groups.insert(*f.model.find(endpoint)->iommu_group);
  CHECK(record->groups.size() == groups.size());
}

TEST_CASE("prepare binds the VM's groups, configures its VFs and sets ACS and ATS, release undoes all of it") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(2, 1, 1));
  REQUIRE(placement.gpus.size() == 2);
  REQUIRE(numa::placed_vfs(placement).size() == 2);
  REQUIRE(placement.nvme.size() == 1);
  auto request = request_for(placement);
  std::vector<std::string> stages;
  request.on_stage = [&](std::string_view stage, std::string detail) {
    stages.push_back(std::string(stage) + ": " + std::move(detail));
  };
  const auto before = f.host.snapshot();
  auto preparer = f.preparer();
  CHECK_FALSE(preparer->libvirt_manages_hostdevs());

  const auto prepared = preparer->prepare("train-0", placement, request);
  REQUIRE_MESSAGE(prepared.ok(), prepared.error().message);
  check_prepared(f, "train-0", placement, request);
  // Each stage told as it ended, for the create's timeline: 2 GPUs, 2 VFs and an NVMe (in 5 groups:
  // each VF and the NVMe alone, each GPU with its companions).
  REQUIRE(stages.size() == 4);
  CHECK(stages[0].starts_with("read_devices: "));
  CHECK(stages[1] == "bind_groups: 5 IOMMU groups to vfio-pci");
  CHECK(stages[2] == "configure_vfs: 2 VFs configured over netlink");
  CHECK(stages[3].starts_with("peer_to_peer: "));
  CHECK(stages[3].ends_with(" ACS/ATS registers set"));
  // The NVMe goes to the VM but peer-to-peer is not set up for it.
  const auto now = discover(f.host);
  const auto nvme = placement.nvme[0].address;
  CHECK(f.host.driver_of(nvme.to_string()) == "vfio-pci");
  if (f.model.find(nvme)->ats) CHECK(now.find(nvme)->ats->enabled == f.model.find(nvme)->ats->enabled);

  const auto allocation = numa::allocation_of("train-0", placement, kGiB);
  const auto released = preparer->release("train-0", allocation);
  REQUIRE_MESSAGE(released.ok(), released.error().message);
  CHECK(describe_difference(before, f.host.snapshot()) == "");
  f.check_netlink_neutral();
  CHECK_FALSE(f.record("train-0").has_value());

  // Again: nothing left to give back, and nothing written.
  const auto writes = f.writes();
  const auto config_writes = f.config_counters.writes;
  const auto applies = f.netlink.applies();
  REQUIRE(preparer->release("train-0", allocation).ok());
  CHECK(f.writes() == writes);
  CHECK(f.config_counters.writes == config_writes);
  CHECK(f.netlink.applies() == applies);
}

TEST_CASE("a whole HCA goes to vfio-pci with its GPUs, peer-to-peer reaches it, and release gives it back") {
  Fixture f({}, "h200ib");
  auto request = gpu_request(2, 0, 0);
  request.whole_nics = 1;
  const auto placement = place(f.model, request);
  REQUIRE(placement.whole_nics.size() == 1);
  const auto hca = placement.whole_nics[0].address;
  REQUIRE(f.model.find(hca)->role == numa::PciRole::nic);
  REQUIRE_FALSE(f.model.find(hca)->physfn.has_value());
  const auto before = f.host.snapshot();
  auto preparer = f.preparer();
  const auto prepared = preparer->prepare("ib-0", placement, DeviceRequest{});
  REQUIRE_MESSAGE(prepared.ok(), prepared.error().message);
  CHECK(f.host.driver_of(hca.to_string()) == "vfio-pci");
  for (const auto& gpu : placement.gpus) CHECK(f.host.driver_of(gpu.gpu.address.to_string()) == "vfio-pci");
  // GPUDirect RDMA: the HCA's ports are among those relaxed, and its ATS is on.
  const auto ports = acs_ports(f.model, {hca});
  for (const auto& port : ports) {
    CHECK_MESSAGE(std::count(placement.p2p_ports.begin(), placement.p2p_ports.end(), port) == 1, port.to_string());
  }
  const auto now = discover(f.host);
  REQUIRE(now.find(hca)->ats.has_value());
  CHECK(now.find(hca)->ats->enabled);
  const auto record = f.record("ib-0");
  REQUIRE(record.has_value());
  CHECK(record->vfs.empty());  // no VF to configure
  REQUIRE(preparer->release("ib-0", numa::allocation_of("ib-0", placement, kGiB)).ok());
  CHECK(describe_difference(before, f.host.snapshot()) == "");
  CHECK_FALSE(f.record("ib-0").has_value());
}

TEST_CASE("a VM that did not ask for peer-to-peer gets its devices with no ACS or ATS register written") {
  Fixture f;
  auto r = gpu_request(2, 1, 0);
  r.peer_to_peer = false;
  const auto placement = place(f.model, r);
  REQUIRE(placement.p2p_ports.empty());
  auto preparer = f.preparer();
  const auto prepared = preparer->prepare("quiet", placement, request_for(placement));
  REQUIRE_MESSAGE(prepared.ok(), prepared.error().message);
  CHECK(f.config_counters.writes == 0);
  CHECK(f.record("quiet")->p2p.empty());
  const auto now = discover(f.host);
  for (const auto& port : acs_ports(f.model, peer_devices(placement))) {
    CHECK(now.find(port)->acs->control == f.model.find(port)->acs->control);
  }
  for (const auto& device : peer_devices(placement)) CHECK_FALSE(now.find(device)->ats->enabled);
  REQUIRE(preparer->release("quiet", {}).ok());
}

TEST_CASE("ports placement kept for isolation are left as the host set them, and ATS below them off") {
  Fixture f;
  // b holds a VF first; a's 8 GPUs then share b's stack, whose three ports stay as they are.
  numa::PlacementRequest vf_only = gpu_request(0, 0, 0);
  vf_only.extra_vfs = 1;
  vf_only.peer_to_peer = false;
  const auto b = place(f.model, vf_only);
  const auto b_vf = b.extra_vfs.at(0).address;
  auto all = gpu_request(8, 1, 0);
  all.vcpus = 64;
  const auto a = place(f.model, all, {numa::allocation_of("b", b, kGiB)});
  REQUIRE(a.p2p_kept.size() == 3);
  auto preparer = f.preparer();
  REQUIRE(preparer->prepare("b", b, request_for(b)).ok());
  REQUIRE(preparer->prepare("a", a, request_for(a)).ok());
  const auto now = discover(f.host);
  for (const auto& kept : a.p2p_kept) {
    CHECK_MESSAGE(now.find(kept.port)->acs->control == f.model.find(kept.port)->acs->control, kept.reason);
  }
  for (const auto& port : a.p2p_ports) {
    const auto& was = *f.model.find(port)->acs;
    CHECK(now.find(port)->acs->control == vfio::vela_acs_control(was.capability, was.control));
  }
  for (const auto& device : peer_devices(a)) {
    const bool on_kept_stack = device.bus == b_vf.bus - 1 || device.bus == b_vf.bus;  // its GPU and NIC
    CHECK_MESSAGE(now.find(device)->ats->enabled == !on_kept_stack, device.to_string());
  }
  CHECK_FALSE(now.find(b_vf)->ats->enabled);
  REQUIRE(preparer->release("a", {}).ok());
  REQUIRE(preparer->release("b", {}).ok());
}

TEST_CASE("the template's VLAN wins over the configured one") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(1, 1, 0));
  auto request = request_for(placement);
  request.vlan = 0;
  auto preparer = f.preparer();
  REQUIRE(preparer->prepare("vm-a", placement, request).ok());
  const auto state = f.vf_state(request.vf_macs[0].first);
  CHECK(state.vlan == 0);
  CHECK(state.qos == 0);  // no priority without a tag
  REQUIRE(preparer->release("vm-a", numa::allocation_of("vm-a", placement, kGiB)).ok());
  f.check_netlink_neutral();
}

// The checks after a prepare that failed: everything back, nothing recorded.
void check_rolled_back(Fixture& f, const Status& prepared, const std::map<std::string, std::string>& before) {
  REQUIRE_FALSE(prepared.ok());
  CHECK_MESSAGE(contains(prepared.error().message, "rolled back"), prepared.error().message);
  CHECK(describe_difference(before, f.host.snapshot()) == "");
  f.check_netlink_neutral();
  CHECK(f.records().all().value().empty());
}

TEST_CASE("the template's trust and spoofchk win over the host's, and a PF below the template's MTU is refused") {
  Fixture f;  // the host's devices.vf: trust on, spoofchk off (configured_options)
  const auto placement = place(f.model, gpu_request(1, 1, 0));
  auto request = request_for(placement);
  request.trust = false;
  request.spoofchk = true;
  request.mtu = 9000;
  const auto vf = request.vf_macs[0].first;
  const auto pf = f.vf_place(vf).first;
  const auto before = f.host.snapshot();
  {
    auto preparer = f.preparer();
    const auto refused = preparer->prepare("vm-a", placement, request);
    check_rolled_back(f, refused, before);
    CHECK_MESSAGE(contains(refused.error().message, "its PF " + pf +
                                                        " has MTU 1500, below the template's "
                                                        "nics.vf.mtu 9000"),
                  refused.error().message);
  }
  // The operator raised the PF's MTU (the host's network configuration does; hostagent never does).
  std::ofstream(fs::canonical(f.host.root() / ("sys/class/net/" + pf)) / "mtu") << "9000\n";
  auto preparer = f.preparer();
  const auto prepared = preparer->prepare("vm-a", placement, request);
  REQUIRE_MESSAGE(prepared.ok(), prepared.error().message);
  CHECK(f.vf_state(vf).trust == std::optional<bool>(false));
  CHECK(f.vf_state(vf).spoofchk == std::optional<bool>(true));
  // Silent template: the host's settings.
  REQUIRE(preparer->release("vm-a", numa::allocation_of("vm-a", placement, kGiB)).ok());
  request.trust.reset();
  request.spoofchk.reset();
  REQUIRE(preparer->prepare("vm-b", placement, request).ok());
  CHECK(f.vf_state(vf).trust == std::optional<bool>(true));
  CHECK(f.vf_state(vf).spoofchk == std::optional<bool>(false));
  REQUIRE(preparer->release("vm-b", numa::allocation_of("vm-b", placement, kGiB)).ok());
  f.check_netlink_neutral();
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

TEST_CASE("a disk the host mounted after placement, or one the operator reserved, is refused at prepare") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(0, 0, 1));
  REQUIRE(placement.nvme.size() == 1);
  const auto nvme = placement.nvme[0].address;
  REQUIRE(nvme.to_string() == "0000:1a:00.0");  // nvme1: the first data disk
  const auto before = f.host.snapshot();
  const auto mountinfo = f.host.root() / "proc/self/mountinfo";
  std::string original;
  {
    std::ifstream in(mountinfo);
    original.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto number = trimmed(f.host.read("/sys/class/block/nvme1n1/dev"));
  std::ofstream(mountinfo, std::ios::app) << "60 21 " << number << " / /mnt/scratch rw - xfs /dev/nvme1n1 rw\n";
  {
    const auto mounted = f.host.snapshot();  // /proc is in the tree too
    auto preparer = f.preparer();
    const auto refused = preparer->prepare("vm-a", placement, request_for(placement));
    check_rolled_back(f, refused, mounted);
    CHECK_MESSAGE(contains(refused.error().message, "the host uses 0000:1a:00.0 (nvme1n1 mounted at /mnt/scratch)"),
                  refused.error().message);
  }
  std::ofstream(mountinfo, std::ios::trunc) << original;
  f.options.reserved = {{nvme, "reserved: scratch for the host's builds"}};
  {
    auto preparer = f.preparer();
    const auto refused = preparer->prepare("vm-a", placement, request_for(placement));
    check_rolled_back(f, refused, before);
    CHECK(contains(refused.error().message, "(reserved: scratch for the host's builds)"));
  }
  f.options.reserved.clear();
  auto preparer = f.preparer();
  REQUIRE(preparer->prepare("vm-a", placement, request_for(placement)).ok());
  CHECK(f.host.driver_of(nvme.to_string()) == "vfio-pci");
  REQUIRE(preparer->release("vm-a", numa::allocation_of("vm-a", placement, kGiB)).ok());
  CHECK(describe_difference(before, f.host.snapshot()) == "");
  // The same preparer reads what the host uses again at its next preparation, not once for its life.
  std::ofstream(mountinfo, std::ios::app) << "60 21 " << number << " / /mnt/scratch rw - xfs /dev/nvme1n1 rw\n";
  const auto mounted = f.host.snapshot();
  const auto refused = preparer->prepare("vm-b", placement, request_for(placement));
  check_rolled_back(f, refused, mounted);
  CHECK(contains(refused.error().message, "(nvme1n1 mounted at /mnt/scratch)"));
}

TEST_CASE("what the host uses is read once per preparation, with the reservations, and again after forget") {
  Fixture f;
  const auto mountinfo = f.host.root() / "proc/self/mountinfo";
  const auto number = trimmed(f.host.read("/sys/class/block/nvme1n1/dev"));
  detail::HostUseReading reading(f.host.root(), {{numa::PciAddress::parse("0000:2b:00.0").value(), "reserved: x"}});
  auto uses_of = [&](const char* address) {
    const auto uses = reading.current();
    REQUIRE_MESSAGE(uses.ok(), uses.error().message);
    return std::count_if(uses->begin(), uses->end(),
                         [&](const numa::HostUse& use) { return use.address.to_string() == address; });
  };
  CHECK(uses_of("0000:1a:00.0") == 0);
  CHECK(uses_of("0000:2b:00.0") == 1);
  std::ofstream(mountinfo, std::ios::app) << "60 21 " << number << " / /mnt/scratch rw - xfs /dev/nvme1n1 rw\n";
  CHECK(uses_of("0000:1a:00.0") == 0);  // the reading this preparation took
  reading.forget();
  CHECK(uses_of("0000:1a:00.0") == 1);
}

TEST_CASE("a sysfs write failing at any step of prepare leaves the tree as it was and no record") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(2, 1, 1));
  const auto request = request_for(placement);
  const auto before = f.host.snapshot();
  std::size_t steps = 0;
  {
    auto clean = f.preparer();
    const std::size_t start = f.writes();
    REQUIRE(clean->prepare("vm-a", placement, request).ok());
    steps = f.writes() - start;
    REQUIRE(clean->release("vm-a", {}).ok());
  }
  REQUIRE(steps >= 5 * 3);  // override, unbind and probe for each of the five groups
  for (std::size_t k = 1; k <= steps; ++k) {
    CAPTURE(k);
    const int fired = f.host.kernel().faults_fired();
    f.host.kernel().fail_write(".*", EIO, static_cast<int>(k));
    const auto prepared = f.preparer()->prepare("vm-a", placement, request);
    CHECK(f.host.kernel().faults_fired() == fired + 1);
    check_rolled_back(f, prepared, before);
  }
}

TEST_CASE("a netlink refusal or read failure at any step of prepare leaves everything as it was") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(2, 1, 0));
  const auto request = request_for(placement);
  const auto before = f.host.snapshot();
  int reads = 0;
  {
    auto clean = f.preparer();
    REQUIRE(clean->prepare("vm-a", placement, request).ok());
    reads = f.netlink.reads();
    REQUIRE(clean->release("vm-a", {}).ok());
  }
  REQUIRE(reads >= 4);  // before and after, for each VF
  for (const char* field : {"mac", "vlan", "rate", "spoofchk", "link_state", "trust"}) {
    CAPTURE(field);
    f.netlink.refuse_next(field);
    const auto prepared = f.preparer()->prepare("vm-a", placement, request);
    CHECK_MESSAGE(contains(prepared.error().message, "set " + std::string(field)), prepared.error().message);
    check_rolled_back(f, prepared, before);
  }
  for (int n = 1; n <= reads; ++n) {
    CAPTURE(n);
    f.netlink.fail_read(n);
    const auto prepared = f.preparer()->prepare("vm-a", placement, request);
    CHECK_MESSAGE(contains(prepared.error().message, "injected failure"), prepared.error().message);
    check_rolled_back(f, prepared, before);
  }
}

TEST_CASE("a config space write or read failing at any step of prepare leaves everything as it was") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(2, 1, 0));
  const auto request = request_for(placement);
  const auto before = f.host.snapshot();
  int writes = 0;
  int reads = 0;
  {
    auto clean = f.preparer();
    REQUIRE(clean->prepare("vm-a", placement, request).ok());
    writes = f.config_counters.writes;
    reads = f.config_counters.reads;
    REQUIRE(clean->release("vm-a", {}).ok());
  }
  REQUIRE(writes >= 10);  // root, GPU and NIC port of two stacks, ATS on two GPUs and two VFs
  REQUIRE(reads > writes);
  for (int n = 1; n <= writes; ++n) {
    CAPTURE(n);
    f.config_counters = ConfigCounters{0, 0, n, 0};
    const auto prepared = f.preparer()->prepare("vm-a", placement, request);
    CHECK_MESSAGE(contains(prepared.error().message, "injected failure of config write"), prepared.error().message);
    check_rolled_back(f, prepared, before);
  }
  // Reads are many (capabilities, registers, read-backs) and each case takes a snapshot of the
  // tree: the first and last, and a spread between them, cover the plan and the apply.
  std::set<int> sampled{1, 2, reads / 4, reads / 2, 3 * reads / 4, reads - 1, reads};
  for (const int n : sampled) {
    CAPTURE(n);
    f.config_counters = ConfigCounters{0, 0, 0, n};
    const auto prepared = f.preparer()->prepare("vm-a", placement, request);
    CHECK_MESSAGE(contains(prepared.error().message, "injected failure of config read"), prepared.error().message);
    check_rolled_back(f, prepared, before);
  }
}

TEST_CASE("a release that fails at any step keeps the record, and the next release finishes it") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(1, 1, 0));
  const auto request = request_for(placement);
  const auto before = f.host.snapshot();
  auto preparer = f.preparer();
  std::size_t steps = 0;
  int config_writes = 0;
  REQUIRE(preparer->prepare("vm-a", placement, request).ok());
  const std::size_t start = f.writes();
  f.config_counters = ConfigCounters{};
  REQUIRE(preparer->release("vm-a", {}).ok());
  steps = f.writes() - start;
  config_writes = f.config_counters.writes;
  REQUIRE(steps >= 2 * 3);
  REQUIRE(config_writes >= 5);  // root, GPU and NIC port, ATS on the GPU and the VF
  auto fail_and_finish = [&](const std::function<void()>& inject, const std::string& why) {
    REQUIRE(preparer->prepare("vm-a", placement, request).ok());
    inject();
    const auto failed = preparer->release("vm-a", {});
    REQUIRE_FALSE(failed.ok());
    CHECK_MESSAGE(contains(failed.error().message, why), failed.error().message);
    CHECK(f.record("vm-a").has_value());
    // A daemon restarted in between reads the record back and finishes from it.
    const auto finished = f.preparer()->release("vm-a", {});
    REQUIRE_MESSAGE(finished.ok(), finished.error().message);
    CHECK(describe_difference(before, f.host.snapshot()) == "");
    f.check_netlink_neutral();
    CHECK_FALSE(f.record("vm-a").has_value());
  };
  for (std::size_t k = 1; k <= steps; ++k) {
    CAPTURE(k);
    fail_and_finish([&] { f.host.kernel().fail_write(".*", EIO, static_cast<int>(k)); }, "not all given back");
  }
  for (int n = 1; n <= config_writes; ++n) {
    CAPTURE(n);
    fail_and_finish([&] { f.config_counters = ConfigCounters{0, 0, n, 0}; }, "injected failure of config write");
  }
  // The same preparer, not restarted: its ledger must still let the registers go.
  REQUIRE(preparer->prepare("vm-a", placement, request).ok());
  f.config_counters = ConfigCounters{0, 0, 1, 0};
  REQUIRE_FALSE(preparer->release("vm-a", {}).ok());
  REQUIRE(preparer->release("vm-a", {}).ok());
  CHECK(describe_difference(before, f.host.snapshot()) == "");
}

// Two VMs on one NIC: a GPU with its VF, and another VF of the same PF. They share the NIC's
// downstream port and the root port above it.
struct SharedPorts {
  numa::Placement first;
  numa::Placement second;
  numa::PciAddress gpu_port;
  std::vector<numa::PciAddress> shared;
};

SharedPorts shared_ports(const Fixture& f) {
  SharedPorts s;
  s.first = place(f.model, gpu_request(1, 1, 0));
  const auto vf = placed_vfs(s.first).at(0);
  const auto* pf = f.model.find(*f.model.find(vf)->physfn);
  const auto other =
      std::find_if(pf->sriov->vfs.begin(), pf->sriov->vfs.end(), [&](const numa::PciAddress& a) { return a != vf; });
  REQUIRE(other != pf->sriov->vfs.end());
  s.second.extra_vfs.push_back(numa::PlacedDevice{*other, pf->numa_node, pf->pcie_switch, 0});
  const auto first_ports = acs_ports(f.model, peer_devices(s.first));
  const auto second_ports = acs_ports(f.model, {*other});
  s.shared.assign(second_ports.begin(), second_ports.end());
  // Placement no longer relaxes a port for two VMs (the p2p isolation tests below), but records
  // written before that rule may hold one twice: the preparer still counts them.
  s.second.p2p_ports = s.shared;
  REQUIRE(s.shared.size() == 2);  // the root port and the NIC's downstream port
  std::vector<numa::PciAddress> only_first;
  std::set_difference(first_ports.begin(), first_ports.end(), second_ports.begin(), second_ports.end(),
                      std::back_inserter(only_first));
  REQUIRE(only_first.size() == 1);  // the GPU's downstream port
  s.gpu_port = only_first[0];
  return s;
}

uint16_t acs_control(const FakeHost& host, const numa::PciAddress& port) {
  return discover(host).find(port)->acs->control;
}

TEST_CASE("a port two VMs share keeps Vela's setting until the second lets it go") {
  Fixture f;
  const auto s = shared_ports(f);
  const auto before = f.host.snapshot();
  auto preparer = f.preparer();
  REQUIRE(preparer->prepare("vm-a", s.first, request_for(s.first)).ok());
  REQUIRE(preparer->prepare("vm-b", s.second, request_for(s.second)).ok());
  check_prepared(f, "vm-b", s.second, request_for(s.second));

  REQUIRE(preparer->release("vm-a", {}).ok());
  for (const auto& port : s.shared) CHECK_MESSAGE(acs_control(f.host, port) == vfio::kAcsVelaControl, port.to_string());
  CHECK(acs_control(f.host, s.gpu_port) == f.model.find(s.gpu_port)->acs->control);
  CHECK_FALSE(discover(f.host).find(s.first.gpus[0].gpu.address)->ats->enabled);
  CHECK(discover(f.host).find(s.second.extra_vfs[0].address)->ats->enabled);

  REQUIRE(preparer->release("vm-b", {}).ok());
  CHECK(describe_difference(before, f.host.snapshot()) == "");
  f.check_netlink_neutral();
  CHECK(f.records().all().value().empty());
}

TEST_CASE("after a restart the records are read back and the release restores the tree") {
  Fixture f;
  const auto s = shared_ports(f);
  const auto before = f.host.snapshot();
  {
    auto preparer = f.preparer();
    // The first VM's record sorts last: read back, the second's (which found the shared ports set
    // already) comes first, and must not make the set value the one to restore.
    REQUIRE(preparer->prepare("vm-z", s.first, request_for(s.first)).ok());
    REQUIRE(preparer->prepare("vm-a", s.second, request_for(s.second)).ok());
  }
  {
    auto restarted = f.preparer();
    REQUIRE(restarted->release("vm-z", {}).ok());
    for (const auto& port : s.shared) CHECK(acs_control(f.host, port) == vfio::kAcsVelaControl);
  }
  auto again = f.preparer();
  REQUIRE(again->release("vm-a", {}).ok());
  CHECK(describe_difference(before, f.host.snapshot()) == "");
  f.check_netlink_neutral();
  CHECK(f.records().all().value().empty());
}

TEST_CASE("prepare twice for one VM, then release, gives back what was there before the first") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(1, 1, 0));
  const auto request = request_for(placement);
  const auto before = f.host.snapshot();
  {
    auto preparer = f.preparer();
    REQUIRE(preparer->prepare("vm-a", placement, request).ok());
    const auto prepared = f.host.snapshot();
    const auto again = preparer->prepare("vm-a", placement, request);
    REQUIRE_MESSAGE(again.ok(), again.error().message);
    CHECK(describe_difference(prepared, f.host.snapshot()) == "");
  }
  // And through a restarted daemon (a retried step after a crash).
  auto restarted = f.preparer();
  REQUIRE(restarted->prepare("vm-a", placement, request).ok());
  REQUIRE(restarted->release("vm-a", {}).ok());
  CHECK(describe_difference(before, f.host.snapshot()) == "");
  f.check_netlink_neutral();
}

TEST_CASE("release_unheld gives back the devices of a VM nobody holds, and only those") {
  Fixture f;
  const auto kept = place(f.model, gpu_request(1, 1, 0));
  const auto kept_allocation = numa::allocation_of("kept", kept, kGiB);
  const auto orphan = place(f.model, gpu_request(1, 1, 0), {kept_allocation});
  const auto before = f.host.snapshot();
  auto preparer = f.preparer();
  REQUIRE(preparer->prepare("kept", kept, request_for(kept)).ok());
  const auto only_kept = f.host.snapshot();
  REQUIRE(preparer->prepare("orphan", orphan, request_for(orphan)).ok());

  auto restarted = f.preparer();
  const auto released = restarted->release_unheld({kept_allocation});
  REQUIRE_MESSAGE(released.ok(), released.error().message);
  REQUIRE(released->size() == 1);
  CHECK(contains(released->front(), "orphan"));
  CHECK(describe_difference(only_kept, f.host.snapshot()) == "");
  CHECK_FALSE(f.record("orphan").has_value());
  CHECK(f.record("kept").has_value());
  CHECK(restarted->release_unheld({kept_allocation}).value().empty());

  REQUIRE(restarted->release("kept", kept_allocation).ok());
  CHECK(describe_difference(before, f.host.snapshot()) == "");
}

// drivers_probe that binds nothing: a failing vfio-pci probe as userspace sees it.
void probe_binds_nothing(FakeKernel& kernel) {
  kernel.model("/sys/bus/pci/drivers_probe",
               [](FakeKernel&, const std::string&, std::string_view) { return ok_status(); });
}

// An attribute's value without the newline (sysfs adds one on read; the fake stores what was written).
// What a VM takes whole and the host keeps on vfio-pci from start: GPUs, NVSwitches, and every NVMe
// controller that is neither the host's (its boot disk), nor a VF, nor a PF with VFs.
bool is_passthrough(const numa::PciFunction& f) {
  if (f.role == numa::PciRole::nvme) return !f.host_use && !f.physfn && !(f.sriov && !f.sriov->vfs.empty());
  return f.role == numa::PciRole::gpu || f.role == numa::PciRole::nvswitch;
}

// An upgrade with a VM running: its record, written by a hostagent that left tenant NVMe on nvme,
// says its controller came from nvme. The new start holds the controller's group (found on
// vfio-pci), and the VM's release leaves it there: never back to nvme with the tenant's data on it.
TEST_CASE("a VM's NVMe recorded as from nvme stays on vfio-pci at its release once the host holds its group") {
  Fixture f;
  f.options.bind_at_start = false;
  const auto placement = place(f.model, gpu_request(0, 0, 1));
  REQUIRE(placement.nvme.size() == 1);
  const std::string nvme = placement.nvme[0].address.to_string();
  REQUIRE(f.preparer()->prepare("vm-a", placement, request_for(placement)).ok());
  const auto record = f.record("vm-a");
  REQUIRE(record.has_value());
  REQUIRE(record->groups.size() == 1);
  CHECK(record->groups[0].functions.at(0).original_driver == "nvme");

  f.options.bind_at_start = true;
  auto parts = f.parts();
  REQUIRE(prepare_host_devices(f.model, parts).ok());
  const auto host_record = f.record(kHostDeviceOwner).value();
  const auto held = std::find_if(host_record.groups.begin(), host_record.groups.end(),
                                 [&](const vfio::GroupBinding& g) { return g.group == record->groups[0].group; });
  REQUIRE(held != host_record.groups.end());
  CHECK(held->functions.at(0).was_vfio);

  const auto resets = f.host.drivers().resets(nvme);
  REQUIRE(f.preparer(discover(f.host))->release("vm-a", {}).ok());
  CHECK(f.host.driver_of(nvme) == "vfio-pci");
  CHECK(f.host.drivers().resets(nvme) == resets);  // the cleaning's reset is the one it gets
  CHECK_FALSE(f.record("vm-a").has_value());
}

TEST_CASE("a GPU the kernel would not bind at start is a fault the preparer hands its sink, as no VM's") {
  Fixture f(probe_binds_nothing);
  auto parts = f.parts();
  const auto changed = prepare_host_devices(f.model, parts);
  REQUIRE_MESSAGE(changed.ok(), changed.error().message);  // the daemon still starts
  std::set<numa::PciAddress> passthrough;
  for (const auto& d : f.model.pci_devices) {
    if (is_passthrough(d)) passthrough.insert(d.address);
  }
  REQUIRE_FALSE(parts.start_faults.empty());
  auto preparer = make_host_device_preparer(f.model, std::move(parts));
  REQUIRE_MESSAGE(preparer.ok(), preparer.error().message);
  std::vector<DeviceFault> faults;
  (*preparer)->report_faults_to([&](const DeviceFault& fault) { faults.push_back(fault); });
  REQUIRE_FALSE(faults.empty());
  for (const auto& fault : faults) {
    CAPTURE(fault.address.to_string());
    CHECK(passthrough.count(fault.address) == 1);  // a GPU, NVSwitch or tenant NVMe group's member, nothing else
    CHECK(fault.vm.empty());
    CHECK(fault.step == "bind to vfio-pci at start");
    CHECK(contains(fault.reason, "did not bind to vfio-pci"));
  }
  // Handed once: a second sink gets none of them again.
  std::vector<DeviceFault> again;
  (*preparer)->report_faults_to([&](const DeviceFault& fault) { again.push_back(fault); });
  CHECK(again.empty());
}

TEST_CASE(
    "host preparation binds every GPU, NVSwitch and tenant NVMe group at start, and a VM then uses them as bound") {
  Fixture f;
  auto parts = f.parts();
  const auto changed = prepare_host_devices(f.model, parts);
  REQUIRE_MESSAGE(changed.ok(), changed.error().message);
  CHECK(*changed);
  std::map<int, std::string> original;  // group -> the driver its endpoint had
  for (const auto& d : f.model.pci_devices) {
    const std::string driver = f.host.driver_of(d.address.to_string());
    if (is_passthrough(d)) {
      CHECK_MESSAGE(driver == "vfio-pci", d.address.to_string());
      original[*d.iommu_group] = *d.driver;
    } else {
      CHECK_MESSAGE(driver == d.driver.value_or(""), d.address.to_string());
    }
  }
  const auto host_record = f.record(kHostDeviceOwner);
  REQUIRE(host_record.has_value());
  CHECK(host_record->groups.size() == original.size());
  for (const auto& group : host_record->groups) {
    for (const auto& function : group.functions) {
      CHECK(function.original_driver == original.at(group.group));
      CHECK_FALSE(function.was_vfio);
    }
  }

  // A second start: nothing to do.
  const auto writes = f.writes();
  auto again_parts = f.parts();
  const auto again = prepare_host_devices(f.model, again_parts);
  REQUIRE(again.ok());
  CHECK_FALSE(*again);
  CHECK(f.writes() == writes);
  CHECK(device_record_to_json(f.record(kHostDeviceOwner).value()) == device_record_to_json(*host_record));

  // The daemon discovers the host again, and a VM's prepare binds only its VFs.
  const auto bound = discover(f.host);
  const auto placement = place(bound, gpu_request(2, 1, 0));
  const auto request = request_for(placement);
  const auto host_ready = f.host.snapshot();
  auto preparer = f.preparer(bound);
  const auto start = f.writes();
  REQUIRE(preparer->prepare("vm-a", placement, request).ok());
  for (std::size_t i = start; i < f.writes(); ++i) {
    const auto& [path, value] = f.host.kernel().writes()[i];
    for (const auto& gpu : placement.gpus) {
      CHECK_FALSE(contains(path + " " + value, gpu.gpu.address.to_string()));
    }
  }
  const auto record = f.record("vm-a");
  REQUIRE(record.has_value());
  CHECK(record->groups.size() == 2);  // the VFs' groups only
  REQUIRE(preparer->release("vm-a", {}).ok());
  for (const auto& gpu : placement.gpus) CHECK(f.host.driver_of(gpu.gpu.address.to_string()) == "vfio-pci");
  CHECK(describe_difference(host_ready, f.host.snapshot()) == "");

  // Someone gives a GPU back to nvidia by hand: a VM placed on it is refused, naming it.
  const std::string gpu = placement.gpus[0].gpu.address.to_string();
  REQUIRE(f.host.kernel().write("/sys/bus/pci/devices/" + gpu + "/driver_override", "\n").ok());
  REQUIRE(f.host.kernel().write("/sys/bus/pci/drivers/vfio-pci/unbind", gpu).ok());
  REQUIRE(f.host.kernel().write("/sys/bus/pci/drivers/nvidia/bind", gpu).ok());
  REQUIRE(f.host.driver_of(gpu) == "nvidia");
  const auto rebound = f.host.snapshot();
  const auto refused = preparer->prepare("vm-b", placement, request);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK_MESSAGE(contains(refused.error().message, gpu), refused.error().message);
  CHECK(describe_difference(rebound, f.host.snapshot()) == "");
  CHECK_FALSE(f.record("vm-b").has_value());

  // What the message advises: the next start binds it again, and the record still names nvidia.
  auto restart_parts = f.parts();
  const auto restarted = prepare_host_devices(f.model, restart_parts);
  REQUIRE_MESSAGE(restarted.ok(), restarted.error().message);
  CHECK(*restarted);
  CHECK(f.host.driver_of(gpu) == "vfio-pci");
  CHECK(device_record_to_json(f.record(kHostDeviceOwner).value()) == device_record_to_json(*host_record));
  auto after_restart = f.preparer(discover(f.host));
  REQUIRE(after_restart->prepare("vm-b", placement, request).ok());
  REQUIRE(after_restart->release("vm-b", {}).ok());
  CHECK(describe_difference(host_ready, f.host.snapshot()) == "");
}

// The addresses of a held-at-boot list, its comment lines aside.
std::set<std::string> held_at_boot(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE_MESSAGE(in.good(), file.string());
  std::set<std::string> addresses;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() != '#') addresses.insert(line);
  }
  return addresses;
}

TEST_CASE("host preparation lists the tenant NVMe controllers it holds for the next boot, rewritten only on a change") {
  Fixture f;
  const fs::path list = f.records_dir.path() / "held-at-boot";
  std::set<std::string> tenant_nvme;
  for (const auto& d : f.model.pci_devices) {
    if (d.role == numa::PciRole::nvme && is_passthrough(d)) tenant_nvme.insert(d.address.to_string());
  }
  REQUIRE_FALSE(tenant_nvme.empty());
  auto parts = f.parts();
  parts.held_at_boot = list;
  REQUIRE(prepare_host_devices(f.model, parts).ok());
  CHECK(held_at_boot(list) == tenant_nvme);  // neither GPUs nor NVSwitches, nor the host's own NVMe

  // A start that changes nothing leaves the file alone (its change rebuilds the initramfs).
  const auto written = fs::last_write_time(list);
  fs::last_write_time(list, written - std::chrono::hours(1));
  auto again = f.parts();
  again.held_at_boot = list;
  REQUIRE(prepare_host_devices(f.model, again).ok());
  CHECK(fs::last_write_time(list) == written - std::chrono::hours(1));

  // Without bind_at_start the operator wants them on nvme: nothing is held at the next boot.
  f.options.bind_at_start = false;
  auto unbound = f.parts();
  unbound.held_at_boot = list;
  REQUIRE(prepare_host_devices(f.model, unbound).ok());
  CHECK(held_at_boot(list).empty());
}

TEST_CASE("host preparation creates the configured VFs unprobed, once") {
  Fixture f([](FakeKernel& kernel) { testing::install_sriov_model(kernel); });
  const numa::PciFunction* pf = nullptr;
  for (const auto& d : f.model.pci_devices) {
    if (d.sriov && !d.sriov->vfs.empty()) {
      pf = &d;
      break;
    }
  }
  REQUIRE(pf != nullptr);
  const std::string address = pf->address.to_string();
  const int count = static_cast<int>(pf->sriov->vfs.size()) - 2;
  REQUIRE(count > 0);
  f.options.bind_at_start = false;
  f.options.vf_counts = {VfCount{pf->address, count}};
  auto parts = f.parts();
  const auto changed = prepare_host_devices(f.model, parts);
  REQUIRE_MESSAGE(changed.ok(), changed.error().message);
  CHECK(*changed);
  const std::string dir = "/sys/bus/pci/devices/" + address + "/";
  CHECK(trimmed(f.host.read(dir + "sriov_drivers_autoprobe")) == "0");
  CHECK(trimmed(f.host.read(dir + "sriov_numvfs")) == std::to_string(count));
  const auto now = discover(f.host);
  REQUIRE(now.find(pf->address)->sriov->vfs.size() == static_cast<std::size_t>(count));
  for (const auto& vf : now.find(pf->address)->sriov->vfs) CHECK(f.host.driver_of(vf.to_string()).empty());
  for (const auto& d : f.model.pci_devices) {
    if (is_passthrough(d)) CHECK(f.host.driver_of(d.address.to_string()) == *d.driver);  // not bound
  }

  const auto writes = f.writes();
  auto again_parts = f.parts();
  const auto again = prepare_host_devices(f.model, again_parts);
  REQUIRE(again.ok());
  CHECK_FALSE(*again);
  CHECK(f.writes() == writes);

  f.options.vf_counts = {VfCount{PciAddress::parse("0000:ee:00.0").value(), 2}};
  auto missing_parts = f.parts();
  const auto missing = prepare_host_devices(f.model, missing_parts);
  REQUIRE_FALSE(missing.ok());
  CHECK_MESSAGE(contains(missing.error().message, "0000:ee:00.0"), missing.error().message);
}

// How many of the lines name `what`.
std::size_t lines_with(const std::vector<std::string>& lines, const std::string& what) {
  return static_cast<std::size_t>(
      std::count_if(lines.begin(), lines.end(), [&](const std::string& line) { return contains(line, what); }));
}

TEST_CASE("after a host reboot, reapply binds the VM's groups, configures its VFs and sets ACS and ATS again") {
  Fixture before_reboot;
  const auto placement = place(before_reboot.model, gpu_request(2, 1, 1));
  const auto request = request_for(placement);
  const auto allocation = numa::allocation_of("vm-a", placement, kGiB);
  REQUIRE(before_reboot.preparer()->prepare("vm-a", placement, request).ok());

  // The same machine booted again: a fresh tree (host drivers bound, VFs blank, Linux's ACS), and
  // hostagent's state directory as it was.
  Fixture f;
  fs::copy(before_reboot.records_dir.path() / "devices", f.records_dir.path() / "devices", fs::copy_options::recursive);
  const auto booted = f.host.snapshot();
  auto preparer = f.preparer();
  const auto repaired = preparer->reapply("vm-a", allocation);
  REQUIRE_MESSAGE(repaired.ok(), repaired.error().message);
  CHECK(lines_with(*repaired, "bound to vfio-pci again") == f.record("vm-a")->groups.size());
  CHECK(lines_with(*repaired, "configured again (mac: wanted 52:54:00:00:10:0") == request.vf_macs.size());
  CHECK(lines_with(*repaired, "ACS control of") == placement.p2p_ports.size());
  check_prepared(f, "vm-a", placement, request);

  // All put back: a second reapply (the next start, or a reconcile) writes nothing anywhere.
  const auto writes = f.writes();
  const int applies = f.netlink.applies();
  const int config_writes = f.config_counters.writes;
  const auto again = preparer->reapply("vm-a", allocation);
  REQUIRE_MESSAGE(again.ok(), again.error().message);
  CHECK(again->empty());
  CHECK(f.writes() == writes);
  CHECK(f.netlink.applies() == applies);
  CHECK(f.config_counters.writes == config_writes);

  REQUIRE(preparer->release("vm-a", allocation).ok());
  CHECK(describe_difference(booted, f.host.snapshot()) == "");
  f.check_netlink_neutral();
}

TEST_CASE("a device the kernel would not bind is reported as a fault of the VM's preparation, and all is undone") {
  Fixture f(probe_binds_nothing);
  const auto placement = place(f.model, gpu_request(1, 1, 0));
  const auto before = f.host.snapshot();
  auto preparer = f.preparer();
  std::vector<DeviceFault> faults;
  preparer->report_faults_to([&](const DeviceFault& fault) { faults.push_back(fault); });

  const auto failed = preparer->prepare("train-0", placement, request_for(placement));
  REQUIRE_FALSE(failed.ok());
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].address == placement.gpus.at(0).gpu.address);  // the first group's first member
  CHECK(faults[0].vm == "train-0");
  CHECK(faults[0].step == "bind to vfio-pci");
  CHECK_MESSAGE(contains(faults[0].reason, "did not bind to vfio-pci"), faults[0].reason);
  CHECK(describe_difference(before, f.host.snapshot()) == "");
}

TEST_CASE("a device that no longer binds after a host reboot is reported as a fault of the VM's reapply") {
  Fixture before_reboot;
  const auto placement = place(before_reboot.model, gpu_request(1, 1, 0));
  REQUIRE(before_reboot.preparer()->prepare("vm-a", placement, request_for(placement)).ok());
  Fixture f(probe_binds_nothing);
  fs::copy(before_reboot.records_dir.path() / "devices", f.records_dir.path() / "devices", fs::copy_options::recursive);
  auto preparer = f.preparer();
  std::vector<DeviceFault> faults;
  preparer->report_faults_to([&](const DeviceFault& fault) { faults.push_back(fault); });
  REQUIRE_FALSE(preparer->reapply("vm-a", numa::allocation_of("vm-a", placement, kGiB)).ok());
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].address == placement.gpus.at(0).gpu.address);
  CHECK(faults[0].vm == "vm-a");
}

TEST_CASE("a running VM's blanked VF is configured again, and nothing else is written") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(1, 1, 0));
  const auto request = request_for(placement);
  const auto allocation = numa::allocation_of("vm-a", placement, kGiB);
  auto preparer = f.preparer();
  REQUIRE(preparer->prepare("vm-a", placement, request).ok());
  const auto writes = f.writes();
  const int config_writes = f.config_counters.writes;
  // The PF's driver was reloaded under the running guest.
  const auto [pf, index] = f.vf_place(request.vf_macs.front().first);
  f.netlink.state(pf, index) = FakeVfNetlink::fresh();

  const auto repaired = preparer->reapply("vm-a", allocation);
  REQUIRE_MESSAGE(repaired.ok(), repaired.error().message);
  REQUIRE(repaired->size() == 1);
  CHECK(contains(repaired->front(), "VF " + std::to_string(index) + " of " + pf + " configured again"));
  CHECK(f.vf_state(request.vf_macs.front().first).mac == request.vf_macs.front().second);
  CHECK(f.writes() == writes);
  CHECK(f.config_counters.writes == config_writes);
  REQUIRE(preparer->release("vm-a", allocation).ok());
}

TEST_CASE("reapply refuses a device off vfio-pci that the VM's record does not name, and writes nothing") {
  Fixture f;
  const auto placement = place(f.model, gpu_request(1, 0, 0));
  auto preparer = f.preparer();
  const auto writes = f.writes();
  const auto refused = preparer->reapply("ghost", numa::allocation_of("ghost", placement, kGiB));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK_MESSAGE(contains(refused.error().message, placement.gpus.front().gpu.address.to_string()),
                refused.error().message);
  CHECK_MESSAGE(contains(refused.error().message, "does not say what it was on before"), refused.error().message);
  CHECK(f.writes() == writes);
}

}  // namespace
// A reset the kernel does not return from: as pci_reset_function waits for a host driver's own
// reset, which a wedged device never finishes (seen on the real-kernel harness with nvme).
class HeldReset {
 public:
  void install(FakeKernel& kernel) {
    kernel.model(R"(/sys/bus/pci/devices/[^/]+/reset)",
                 [this](FakeKernel& writer, const std::string& path, std::string_view) {
                   {
                     const std::lock_guard lock(mutex_);
                     if (path != "/sys/bus/pci/devices/" + held_ + "/reset") return ok_status();
                     entered_ = true;
                   }
                   entered_changed_.notify_all();
                   writer.unlocked([this] { released_.wait(); });
                   return ok_status();
                 });
  }
  void hold(const std::string& function) {
    const std::lock_guard lock(mutex_);
    held_ = function;
  }
  bool wait_entered() {
    std::unique_lock lock(mutex_);
    return entered_changed_.wait_for(lock, std::chrono::seconds(60), [this] { return entered_; });
  }
  void release() { released_.open(); }

 private:
  std::mutex mutex_;
  std::condition_variable entered_changed_;
  std::string held_;
  bool entered_ = false;
  testing::Gate released_;
};

TEST_CASE("a reset the kernel holds does not hold up a preparation: it runs outside the preparer's lock") {
  HeldReset held;
  Fixture f([&](FakeKernel& kernel) { held.install(kernel); });
  const auto placement = place(f.model, gpu_request(1, 0, 0));
  REQUIRE(placement.gpus.size() == 1);
  // Another GPU than the VM's is being cleaned, its reset held by the kernel.
  const auto other = std::find_if(f.model.pci_devices.begin(), f.model.pci_devices.end(), [&](const auto& d) {
    return d.role == numa::PciRole::gpu && d.address != placement.gpus[0].gpu.address;
  });
  REQUIRE(other != f.model.pci_devices.end());
  held.hold(other->address.to_string());
  auto preparer = f.preparer();
  auto steps = preparer->cleaning_steps(*other);
  REQUIRE(steps.front().name == "reset");
  CHECK_FALSE(steps.front().exclusive);
  StepOutcome outcome;
  std::thread resetting([&] { outcome = steps.front().run(); });
  REQUIRE(held.wait_entered());

  auto preparing = std::async(std::launch::async, [&] { return preparer->prepare("vm-b", placement, {}); });
  // Liveness, not speed: a preparation behind the held reset would never finish; the bound only
  // turns that into a failure instead of a hung suite.
  const bool finished = preparing.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  held.release();
  resetting.join();
  REQUIRE_MESSAGE(finished, "the preparation waited for the held reset");
  const auto prepared = preparing.get();
  CHECK_MESSAGE(prepared.ok(), prepared.error().message);
  CHECK(outcome.result == StepResult::passed);
  CHECK(preparer->release("vm-b", numa::allocation_of("vm-b", placement, kGiB)).ok());
}

}  // namespace hostagent::devices
