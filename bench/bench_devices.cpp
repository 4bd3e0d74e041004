// Device preparation of the largest shipped shape (gx3d-160x1792x8h100: 8 H100, a ConnectX-7 VF
// beside each, 8 NVMe) on the simulated vela2 host: the daemon's own preparer
// (make_host_device_preparer) readying every device of the placement and giving it back, over the
// fake kernel of tests/support (each sysfs write does what the PCI driver core does), libpci on the
// fixture's config files, and the in-memory VF netlink. Its parts alone show where the time goes:
// the vfio binder, the VF configuration, the ACS/ATS settings. The fixture lives on tmpfs, as sysfs
// lives in memory; the preparer's device records go to a directory on disk (/tmp), and, in a second
// arm, on tmpfs (/dev/shm): the difference is what making them durable costs.
//
// Baselines, measured in the same run: (a) reading the live state of every device's group
// (VfioBinder::inspect_group, what the preparer does before each bind), and (b) the fake kernel
// replaying the very sysfs writes one prepare+release makes, with no hostagent logic around them:
// what the fixture's write path costs. Rounds are interleaved (one round = every arm once, the first
// arm rotating), so drift on a shared machine hits the arms alike; ratios are medians over medians.
// No timing is asserted; what is checked is that every release leaves the fixture as it found it.
//
// Then a VM's release as the daemon cleans it (issue 44): the daemon itself (VmService, over
// libvirt's test driver) creates and deletes the same VM, its preparer over a fake kernel of its own
// whose every function reset takes the 100 ms the kernel's pcie_flr waits, and each NVMe a
// controller of its own. One arm cleans the released devices one at a time (hygiene.parallel: 1,
// what cleaning did before issue 44), the other all at once (0, the default); the rounds interleave.
// Timed: the release's wall time as the daemon measures it (its release event: from the first
// device waiting to the last free), against the sum of the devices' steps; every device must come
// back clean. The resets are the only wait modelled: a real NVMe format or GPU scrub takes seconds
// to hours, which widens the gap.
//
// Usage: bench_devices [ROUNDS [CLEANING_ROUNDS]]   (default 60 and 5)
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "assembly.hpp"
#include "fake_kernel.hpp"
#include "fake_nvme.hpp"
#include "fake_pci_drivers.hpp"
#include "fake_vf_netlink.hpp"
#include "file_calls.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/service_parts.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/devices/device_records.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "hostagent/sriov/vf_configurator.hpp"
#include "hostagent/vfio/p2p_settings.hpp"
#include "hostagent/vfio/vfio_binding.hpp"
#include "hostagent/vmtemplates/shape_request.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "samples.hpp"
#include "scratch_dir.hpp"

namespace {

using namespace hostagent;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// Everything the preparation does through the OS, counted by the forwarding objects below and by
// the --wrap'd file calls of the device records.
struct Counts {
  int64_t sysfs_writes = 0, netlink_reads = 0, netlink_applies = 0, config_reads = 0, config_writes = 0;
  int64_t fsyncs = 0, fsync_ns = 0, renames = 0, unlinks = 0, file_ops_ns = 0;

  Counts minus(const Counts& o) const {
    return {sysfs_writes - o.sysfs_writes,
            netlink_reads - o.netlink_reads,
            netlink_applies - o.netlink_applies,
            config_reads - o.config_reads,
            config_writes - o.config_writes,
            fsyncs - o.fsyncs,
            fsync_ns - o.fsync_ns,
            renames - o.renames,
            unlinks - o.unlinks,
            file_ops_ns - o.file_ops_ns};
  }
  void add(const Counts& o) {
    sysfs_writes += o.sysfs_writes;
    netlink_reads += o.netlink_reads;
    netlink_applies += o.netlink_applies;
    config_reads += o.config_reads;
    config_writes += o.config_writes;
    fsyncs += o.fsyncs;
    fsync_ns += o.fsync_ns;
    renames += o.renames;
    unlinks += o.unlinks;
    file_ops_ns += o.file_ops_ns;
  }
};

Counts g_counts;  // the benchmark is single-threaded

Counts counts_now() {
  Counts now = g_counts;
  const auto files = bench::file_calls_now();
  now.fsyncs = files.fsyncs;
  now.fsync_ns = files.fsync_ns;
  now.renames = files.renames;
  now.unlinks = files.unlinks;
  now.file_ops_ns = files.file_ops_ns;
  return now;
}

// ---- small tools ------------------------------------------------------------------------------

using bench::Samples;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_devices: %s\n", what.c_str());
  std::exit(1);
}

void check(const Status& status, const std::string& what) {
  if (!status.ok()) fail(what + ": " + status.error().message);
}

template <typename T>
T take(Result<T> result, const std::string& what) {
  if (!result.ok()) fail(what + ": " + result.error().message);
  return std::move(result).value();
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

// ---- the OS interfaces, forwarding and counting -------------------------------------------------

// The daemon's SysfsWriter, as make_sysfs_writer would be on a host, here forwarding to the fake
// kernel. While `recording`, keeps each write for the replay baseline.
class CountingWriter final : public SysfsWriter {
 public:
  explicit CountingWriter(testing::FakeKernel& kernel) : kernel_(kernel) {}
  Status write(const std::string& kernel_path, std::string_view value) override {
    ++g_counts.sysfs_writes;
    if (recording) recorded.emplace_back(kernel_path, std::string(value));
    return kernel_.write(kernel_path, value);
  }
  const fs::path& root() const override { return kernel_.root(); }

  bool recording = false;
  std::vector<std::pair<std::string, std::string>> recorded;

 private:
  testing::FakeKernel& kernel_;
};

class CountingConfigSpace final : public vfio::ConfigSpace {
 public:
  explicit CountingConfigSpace(std::unique_ptr<vfio::ConfigSpace> inner) : inner_(std::move(inner)) {}
  Result<uint16_t> read16(const numa::PciAddress& device, int offset) override {
    ++g_counts.config_reads;
    return inner_->read16(device, offset);
  }
  Status write16(const numa::PciAddress& device, int offset, uint16_t value) override {
    ++g_counts.config_writes;
    return inner_->write16(device, offset, value);
  }
  Result<std::optional<int>> find_ext_capability(const numa::PciAddress& device, int cap_id) override {
    ++g_counts.config_reads;  // a walk of the extended capability list: reads, however many
    return inner_->find_ext_capability(device, cap_id);
  }

 private:
  std::unique_ptr<vfio::ConfigSpace> inner_;
};

class CountingNetlink final : public sriov::VfNetlink {
 public:
  explicit CountingNetlink(const numa::HostModel& host) {
    // vela2's ConnectX-7 PFs, each with the VFs its fixture made, fresh.
    for (const auto& f : host.pci_devices) {
      if (f.sriov && !f.net_interfaces.empty()) inner_.add_pf(f.net_interfaces.front(), int(f.sriov->vfs.size()));
    }
  }
  Result<sriov::VfState> read(const std::string& pf_netdev, int vf) override {
    ++g_counts.netlink_reads;
    return inner_.read(pf_netdev, vf);
  }
  Status apply(const std::string& pf_netdev, int vf, const sriov::VfSettings& settings) override {
    ++g_counts.netlink_applies;
    return inner_.apply(pf_netdev, vf, settings);
  }

 private:
  sriov::fake::FakeVfNetlink inner_;
};

// ---- the fixture and the VM's request -------------------------------------------------------------

fs::path written_vela2(const fs::path& root) {
  check(simhost::write_sysfs_tree(take(simhost::builtin_host("vela2"), "vela2"), root), "write vela2");
  return root;
}

struct Fixture {
  explicit Fixture(const fs::path& scratch)
      : root(written_vela2(scratch / "host")),
        kernel(root),
        drivers(testing::install_pci_driver_model(kernel)),
        host(take(discovery::discover_from_sysfs(root), "discover vela2")) {}

  fs::path root;
  testing::FakeKernel kernel;
  std::shared_ptr<testing::FakePciDrivers> drivers;
  numa::HostModel host;
};

struct VmDevices {
  numa::Placement placement;
  devices::DeviceRequest request;
  std::vector<numa::PciAddress> passthrough;  // as the preparer binds them: GPUs, companions, VFs; NVMe
  std::vector<numa::PciAddress> peers;        // as it sets ACS/ATS for: GPUs and VFs
};

VmDevices vm_devices(const numa::HostModel& host) {
  const auto shape = take(vmtemplates::load_template_file(
                              fs::path(HOSTAGENT_SOURCE_DIR) / "vmtemplates/templates/gx3d-160x1792x8h100.yaml", {}),
                          "load the template");
  const numa::HostPolicy policy{{0, 1, 2, 3, 96, 97, 98, 99}, true, {}, {}, {}, {}};
  VmDevices vm;
  vm.placement = take(numa::place(host, {}, policy, placement_request(shape)), "place the template");
  render::GuestOptions options;
  options.name = "train-0";
  vm.request.vf_macs = take(render::vf_mac_addresses(shape, vm.placement, options), "VF MACs");
  vm.request.vlan = shape.nics.vf.vlan;
  for (const auto& gpu : vm.placement.gpus) {
    vm.passthrough.push_back(gpu.gpu.address);
    vm.passthrough.insert(vm.passthrough.end(), gpu.companions.begin(), gpu.companions.end());
    vm.peers.push_back(gpu.gpu.address);
    for (const auto& vf : gpu.vfs) {
      vm.passthrough.push_back(vf.address);
      vm.peers.push_back(vf.address);
    }
  }
  for (const auto& vf : vm.placement.extra_vfs) {
    vm.passthrough.push_back(vf.address);
    vm.peers.push_back(vf.address);
  }
  for (const auto& nic : vm.placement.whole_nics) {
    vm.passthrough.push_back(nic.address);
    vm.peers.push_back(nic.address);
  }
  for (const auto& nvme : vm.placement.nvme) vm.passthrough.push_back(nvme.address);
  return vm;
}

// ---- the arms ---------------------------------------------------------------------------------

struct Arm {
  const char* label;
  std::function<void()> round;  // one timed round, which appends to the samples itself
  Samples total;
};

// The daemon's preparer with its own counting interfaces, over the shared fixture.
struct Preparer {
  std::unique_ptr<devices::DevicePreparer> preparer;
  CountingWriter* writer = nullptr;  // owned by the preparer
  Samples prepare, release;
  Samples fsync, file_ops;  // the records' fsyncs, and their open/rename/unlink, in each prepare+release
  Counts prepare_counts, release_counts;
  int rounds = 0;
};

Preparer make_preparer(Fixture& fixture, const fs::path& records) {
  auto writer = std::make_unique<CountingWriter>(fixture.kernel);
  Preparer made;
  made.writer = writer.get();
  devices::HostDeviceParts parts;
  parts.sysfs_root = fixture.root;
  parts.writer = std::move(writer);
  parts.config_space = std::make_unique<CountingConfigSpace>(
      take(vfio::make_libpci_config_space(fixture.root), "libpci over the fixture"));
  parts.netlink = std::make_unique<CountingNetlink>(fixture.host);
  parts.records_directory = records;
  made.preparer = take(devices::make_host_device_preparer(fixture.host, std::move(parts)), "make the preparer");
  return made;
}

double prepare_round(Preparer& p, const VmDevices& vm, bool timed) {
  Counts before = counts_now();
  auto start = Clock::now();
  check(p.preparer->prepare("train-0", vm.placement, vm.request), "prepare");
  const double prepare_ms = double(ns_since(start)) / 1e6;
  Counts middle = counts_now();
  start = Clock::now();
  check(p.preparer->release("train-0", numa::allocation_of("train-0", vm.placement, 1ULL << 30)), "release");
  const double release_ms = double(ns_since(start)) / 1e6;
  if (timed) {
    p.prepare.ms.push_back(prepare_ms);
    p.release.ms.push_back(release_ms);
    const Counts after = counts_now();
    p.prepare_counts.add(middle.minus(before));
    p.release_counts.add(after.minus(middle));
    p.fsync.ms.push_back(double(after.fsync_ns - before.fsync_ns) / 1e6);
    p.file_ops.ms.push_back(double(after.file_ops_ns - before.file_ops_ns) / 1e6);
    ++p.rounds;
  }
  return prepare_ms + release_ms;
}

// What a start does first (DevicePreparer::reapply), timed twice: with everything in place (the
// start of a VM stopped on a host that stayed up: reads only), and after the host undid it all (a
// reboot: the record kept, the tree, VFs and registers as before the prepare). The prepare and the
// releases around them are not timed.
struct Reapply {
  Samples in_place, rebooted;
};

void reapply_round(Preparer& p, const fs::path& records, const VmDevices& vm, Reapply& out, bool timed) {
  const auto allocation = numa::allocation_of("train-0", vm.placement, 1ULL << 30);
  check(p.preparer->prepare("train-0", vm.placement, vm.request), "prepare");
  auto start = Clock::now();
  const auto held = take(p.preparer->reapply("train-0", allocation), "reapply in place");
  const double in_place_ms = double(ns_since(start)) / 1e6;
  if (!held.empty()) fail("reapply found a prepared VM's devices not in place: " + held.front());
  auto store = take(devices::DeviceRecords::open(records), "open the records");
  const auto record = take(store.read("train-0"), "read the record");
  check(p.preparer->release("train-0", allocation), "release");
  check(store.write(*record), "put the record back");  // the host rebooted; hostagent's state did not
  start = Clock::now();
  const auto repaired = take(p.preparer->reapply("train-0", allocation), "reapply after a reboot");
  const double rebooted_ms = double(ns_since(start)) / 1e6;
  if (repaired.empty()) fail("reapply after a reboot put nothing back");
  check(p.preparer->release("train-0", allocation), "release");
  if (timed) {
    out.in_place.ms.push_back(in_place_ms);
    out.rebooted.ms.push_back(rebooted_ms);
  }
}

// The first device of each IOMMU group the placement holds, in the preparer's order.
std::vector<numa::PciAddress> group_leaders(const vfio::VfioBinder& binder, const VmDevices& vm) {
  std::set<int> seen;
  std::vector<numa::PciAddress> leaders;
  for (const auto& device : vm.passthrough) {
    if (seen.insert(take(binder.inspect_group(device), "inspect " + device.to_string()).group).second) {
      leaders.push_back(device);
    }
  }
  return leaders;
}

void bind_and_release(vfio::VfioBinder& binder, const std::vector<numa::PciAddress>& leaders) {
  std::vector<vfio::GroupBinding> bound;
  bound.reserve(leaders.size());
  for (const auto& device : leaders) bound.push_back(take(binder.bind_group(device), "bind " + device.to_string()));
  for (auto group = bound.rbegin(); group != bound.rend(); ++group) check(binder.release(*group), "release a group");
}

struct VfTarget {
  std::string pf_netdev;
  int index = 0;
  sriov::VfSettings wanted;
};

std::vector<VfTarget> vf_targets(const numa::HostModel& host, const VmDevices& vm) {
  std::vector<VfTarget> out;
  for (const auto& [vf, mac] : vm.request.vf_macs) {
    const auto* function = host.find(vf);
    const auto* pf = function != nullptr && function->physfn ? host.find(*function->physfn) : nullptr;
    if (pf == nullptr || !pf->sriov || pf->net_interfaces.empty()) fail(vf.to_string() + " has no PF netdev");
    const auto& vfs = pf->sriov->vfs;
    const auto index = static_cast<int>(std::find(vfs.begin(), vfs.end(), vf) - vfs.begin());
    out.push_back(
        {pf->net_interfaces.front(), index, devices::vf_settings(devices::PreparationOptions{}, mac, vm.request)});
  }
  return out;
}

void configure_and_reset(sriov::VfNetlink& netlink, const std::vector<VfTarget>& targets) {
  std::vector<sriov::VfConfigRecord> records;
  records.reserve(targets.size());
  for (const auto& t : targets) {
    records.push_back(take(sriov::configure(netlink, t.pf_netdev, t.index, t.wanted), "configure " + t.pf_netdev));
  }
  for (auto r = records.rbegin(); r != records.rend(); ++r) check(sriov::reset(netlink, *r), "reset a VF");
}

std::size_t apply_and_restore(const numa::HostModel& host, vfio::ConfigSpace& config, const VmDevices& vm) {
  const auto needs = take(vfio::p2p_needs(host, vm.peers, config), "p2p_needs");
  const auto applied = take(vfio::apply_p2p(config, needs), "apply_p2p");
  check(vfio::restore_p2p(config, applied), "restore_p2p");
  return applied.size();
}

// ---- report -----------------------------------------------------------------------------------

void print_row(const char* label, const Samples& s, const Samples& inspect, const Samples& replay) {
  std::printf("  %-52s %8.3f %8.3f %9.1f %8.2f\n", label, s.median(), s.p90(), s.median() / inspect.median(),
              s.median() / replay.median());
}

void print_counts(const char* what, const Counts& c, int rounds) {
  const auto per = [rounds](int64_t n) { return double(n) / rounds; };
  std::printf(
      "  per %-8s sysfs writes %5.0f, netlink reads %3.0f applies %3.0f, config-space reads %4.0f writes %3.0f, "
      "records written %3.0f removed %1.0f, fsyncs %3.0f (%.2f ms), record open/rename/unlink %.2f ms\n",
      what, per(c.sysfs_writes), per(c.netlink_reads), per(c.netlink_applies), per(c.config_reads),
      per(c.config_writes), per(c.renames), per(c.unlinks), per(c.fsyncs), per(c.fsync_ns) / 1e6,
      per(c.file_ops_ns) / 1e6);
}

Samples sum(const Samples& a, const Samples& b) {
  Samples out;
  for (std::size_t i = 0; i < a.ms.size(); ++i) out.ms.push_back(a.ms[i] + b.ms[i]);
  return out;
}

// ---- a release's cleaning: every device at once against one at a time -------------------------

// Each NVMe a controller of its own, as on a host, with a namespace the tenant wrote: one erase
// never touches another's state, so erases on two threads share nothing but the map.
class PerDeviceNvme final : public nvme::ControllerOpener {
 public:
  Result<std::unique_ptr<nvme::Controller>> open(const std::string& controller_device,
                                                 nvme::NamespaceDevices /*namespace_devices*/) override {
    return controller(controller_device);
  }
  Result<std::unique_ptr<nvme::Controller>> open_vfio(const std::string& address, int /*group*/) override {
    return controller(address);
  }

 private:
  Result<std::unique_ptr<nvme::Controller>> controller(const std::string& key) {
    const std::lock_guard lock(mutex_);
    auto [at, made] = states_.try_emplace(key);
    if (made) at->second.namespaces = {testing::fake_namespace(1)};
    at->second.write(1, 0, 0xa5);  // the tenant's, for the erase to take and the read-back to check
    return std::unique_ptr<nvme::Controller>(std::make_unique<testing::FakeNvmeController>(at->second));
  }
  std::mutex mutex_;
  std::map<std::string, testing::FakeNvmeState> states_;  // node-based: a state never moves
};

// The nvme driver's view of each NVMe it drives, as drivers/nvme/host/core.c leaves it: a live
// controller under the function, which the erase step waits for after a rebind.
void drive_nvme_controllers(const Fixture& fixture) {
  int index = 0;
  for (const auto& f : fixture.host.pci_devices) {
    if (f.role != numa::PciRole::nvme) continue;
    const fs::path dir = fixture.kernel.host_path("/sys/bus/pci/devices/" + f.address.to_string() + "/nvme");
    std::error_code ec;
    if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec)) {
      for (const auto& entry : fs::directory_iterator(dir)) std::ofstream(entry.path() / "state") << "live\n";
      continue;
    }
    fs::create_directories(dir / ("nvme" + std::to_string(100 + index)));
    std::ofstream(dir / ("nvme" + std::to_string(100 + index)) / "state") << "live\n";
    ++index;
  }
}

// One arm: a daemon of its own (state, libvirt test driver instance and fake kernel), cleaning
// hygiene.parallel devices at a time.
struct CleaningArm {
  CleaningArm(int at_a_time, const fs::path& scratch, const fs::path& shm)
      : parallel(at_a_time),
        fixture(shm / "host"),
        vm_name("clean-" + std::to_string(at_a_time)),
        request{.name = take(VmName::parse(vm_name, "name"), "the VM's name"), .template_name = "gx3d-160x1792x8h100"} {
    fixture.kernel.delay(R"(/sys/bus/pci/devices/[^/]+/reset)", std::chrono::milliseconds(100));
    drive_nvme_controllers(fixture);
    // The host's network configuration, as a fabric's hosts have it: PFs that carry jumbo frames,
    // which the template's VFs ask for (nics.vf.mtu).
    for (const auto& f : fixture.host.pci_devices) {
      if (f.sriov && !f.net_interfaces.empty()) {
        std::ofstream(fixture.kernel.host_path("/sys/class/net/" + f.net_interfaces.front() + "/mtu")) << "9000\n";
      }
    }
    auto config = config::embedded_default_config("vela2", scratch);
    // A test driver of its own (a file-backed test:/// URI is a private instance), so that neither
    // arm's daemon sees the other's domains.
    fs::create_directories(scratch);
    // The pool embedded_default_config names, as test:///default has it.
    std::ofstream(scratch / "node.xml") << "<node><pool type='dir'><name>" << config.storage_pool
                                        << "</name><target><path>/default-pool</path></target></pool></node>\n";
    config.libvirt_uri = "test://" + (scratch / "node.xml").string();
    config.template_directories = {fs::path(HOSTAGENT_SOURCE_DIR) / "vmtemplates" / "templates"};
    config.hygiene.parallel = at_a_time;
    // The template's image is the fleet's; a sparse one where a request's image may lie stands in.
    const fs::path image = config.image_directories.front() / "boot.raw";
    fs::create_directories(image.parent_path());
    std::ofstream(image, std::ios::binary).close();
    fs::resize_file(image, 1ULL << 30);
    request.boot_image = image.string();
    auto parts = take(cli::assemble_parts(config), "assemble the daemon");
    parts.config.devices.preparation = "hostagent";
    parts.host = fixture.host;
    parts.readers = take(cli::sysfs_readers(fixture.root), "the readers of the fixture");
    devices::HostDeviceParts device_parts;
    device_parts.sysfs_root = fixture.root;
    device_parts.writer = std::make_unique<CountingWriter>(fixture.kernel);
    device_parts.config_space = take(vfio::make_libpci_config_space(fixture.root), "libpci over the fixture");
    device_parts.netlink = std::make_unique<CountingNetlink>(fixture.host);
    device_parts.nvme = std::make_unique<PerDeviceNvme>();
    device_parts.records_directory = scratch / "state" / "devices";
    parts.devices = take(devices::make_host_device_preparer(fixture.host, std::move(device_parts)), "the preparer");
    service = take(daemon::start_service(std::move(parts)), "start the daemon");
    subscription = service->subscribe([this](const service::ServiceEvent& event) {
      if (!event.release) return;
      const std::lock_guard lock(mutex);
      release = *event.release;
      released.notify_all();
    });
  }
  ~CleaningArm() { service->unsubscribe(subscription); }
  CleaningArm(const CleaningArm&) = delete;
  CleaningArm& operator=(const CleaningArm&) = delete;

  // Create, delete, and wait for the release's end (the daemon's event), every device clean.
  void round(bool timed) {
    {
      const std::lock_guard lock(mutex);
      release.reset();
    }
    const auto created = take(service::create_vm(*service, request), "create " + vm_name);
    if (created.state != virt::to_string(virt::DomainState::running)) fail(vm_name + " is " + created.state);
    check(service::delete_vm(*service, request.name), "delete " + vm_name);
    std::unique_lock lock(mutex);
    if (!released.wait_for(lock, std::chrono::minutes(5), [this] { return release.has_value(); })) {
      fail(vm_name + ": its release did not end within 5 minutes");
    }
    const auto quarantined = service->quarantined();
    if (!quarantined.empty()) {
      fail(vm_name + ": " + quarantined.front().address.to_string() + " was quarantined at " +
           quarantined.front().step + ": " + quarantined.front().reason);
    }
    devices = release->devices;
    if (!timed) return;
    wall.ms.push_back(release->seconds * 1e3);
    steps.ms.push_back(release->steps_seconds * 1e3);
  }

  int parallel;
  Fixture fixture;
  std::string vm_name;
  service::CreateVmRequest request;
  std::unique_ptr<service::VmService> service;
  uint64_t subscription = 0;
  std::mutex mutex;
  std::condition_variable released;
  std::optional<service::ReleaseCleaningView> release;
  std::size_t devices = 0;
  Samples wall, steps;
};

void cleaning_section(int rounds) {
  const bench::ScratchDir scratch("cleaning", "/tmp");
  const bench::ScratchDir shm("cleaning", "/dev/shm");
  // The daemon's state (device states, evidence) on disk, as on a host, and in a third arm on
  // tmpfs: the difference is what making each cleaning's record durable costs.
  std::vector<std::unique_ptr<CleaningArm>> arms;
  for (const auto& [parallel, state] : {std::pair{1, scratch.path()}, {0, scratch.path()}, {0, shm.path() / "state"}}) {
    const std::string name = "parallel-" + std::to_string(parallel) + "-" + std::to_string(arms.size());
    arms.push_back(std::make_unique<CleaningArm>(parallel, state / name, shm.path() / name));
  }
  for (auto& arm : arms) arm->round(false);  // warm
  const auto start = Clock::now();
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < arms.size(); ++i) arms[(round + i) % arms.size()]->round(true);
  }
  const double wall_s = double(ns_since(start)) / 1e9;
  const auto& serial = *arms[0];
  const auto& parallel = *arms[1];
  std::printf(
      "\nthe release's cleaning, as the daemon runs it: gx3d-160x1792x8h100 created and deleted, %zu devices "
      "cleaned, each function reset taking the kernel's 100 ms FLR wait; %d rounds interleaved, %.1f s\n",
      parallel.devices, rounds, wall_s);
  std::printf("  %-56s %8s %8s %12s %13s\n", "(ms, from the first device waiting to the last free)", "median", "p90",
              "steps summed", "x all at once");
  const auto row = [&](const char* label, const CleaningArm& arm) {
    std::printf("  %-56s %8.1f %8.1f %12.1f %13.2f\n", label, arm.wall.median(), arm.wall.p90(), arm.steps.median(),
                arm.wall.median() / parallel.wall.median());
  };
  row("one at a time (hygiene.parallel: 1), state on disk", serial);
  row("all at once (hygiene.parallel: 0, the default), on disk", parallel);
  row("all at once, the daemon's state on tmpfs", *arms[2]);
  std::printf("  one at a time / all at once = %.2f; all at once, wall / steps summed = %.3f\n",
              serial.wall.median() / parallel.wall.median(), parallel.wall.median() / parallel.steps.median());
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 60;
  const int cleaning_rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const std::string load_before = load_average();
  const bench::ScratchDir scratch("devices", "/tmp");
  const bench::ScratchDir shm("devices", "/dev/shm");
  // The fixture stands for sysfs, which lives in memory: on tmpfs, so that its own file system
  // work does not queue behind the records' fsyncs on the disk (ext4's journal).
  Fixture fixture(shm.path());
  const VmDevices vm = vm_devices(fixture.host);

  Preparer on_disk = make_preparer(fixture, scratch.path() / "records");
  Preparer on_tmpfs = make_preparer(fixture, shm.path() / "records");
  Preparer restarting = make_preparer(fixture, shm.path() / "reapply-records");
  Reapply reapply;

  CountingWriter part_writer(fixture.kernel);
  vfio::VfioBinder binder(take(SysfsRoot::open(fixture.root), "open the fixture"), part_writer);
  const auto leaders = group_leaders(binder, vm);
  CountingNetlink part_netlink(fixture.host);
  const auto vf_list = vf_targets(fixture.host, vm);
  CountingConfigSpace part_config(take(vfio::make_libpci_config_space(fixture.root), "libpci over the fixture"));

  // One untimed prepare+release, recording its writes for the replay, and checked to leave the
  // fixture exactly as it was.
  const auto pristine = testing::snapshot_tree(fixture.root);
  on_disk.writer->recording = true;
  prepare_round(on_disk, vm, false);
  on_disk.writer->recording = false;
  const auto replay = on_disk.writer->recorded;
  if (const auto diff = testing::describe_difference(pristine, testing::snapshot_tree(fixture.root)); !diff.empty()) {
    fail("prepare+release did not leave the fixture as it was:\n" + diff);
  }

  std::size_t registers = 0;
  Samples binder_ms, vf_ms, p2p_ms, inspect_ms, replay_ms;
  const auto time_into = [](Samples& samples, const std::function<void()>& work) {
    const auto start = Clock::now();
    work();
    samples.ms.push_back(double(ns_since(start)) / 1e6);
  };
  std::vector<std::function<void(bool)>> arms = {
      [&](bool timed) { prepare_round(on_disk, vm, timed); },
      [&](bool timed) { prepare_round(on_tmpfs, vm, timed); },
      [&](bool timed) { reapply_round(restarting, shm.path() / "reapply-records", vm, reapply, timed); },
      [&](bool /*timed*/) { time_into(binder_ms, [&] { bind_and_release(binder, leaders); }); },
      [&](bool /*timed*/) { time_into(vf_ms, [&] { configure_and_reset(part_netlink, vf_list); }); },
      [&](bool /*timed*/) { time_into(p2p_ms, [&] { registers = apply_and_restore(fixture.host, part_config, vm); }); },
      [&](bool /*timed*/) {
        time_into(inspect_ms, [&] {
          for (const auto& device : vm.passthrough) take(binder.inspect_group(device), "inspect");
        });
      },
      [&](bool /*timed*/) {
        time_into(replay_ms, [&] {
          for (const auto& [path, value] : replay) check(fixture.kernel.write(path, value), "replay " + path);
        });
      },
  };
  for (auto& arm : arms) arm(false);  // warm: caches, the libpci handles, the records directories
  for (auto* samples : {&binder_ms, &vf_ms, &p2p_ms, &inspect_ms, &replay_ms}) samples->ms.clear();

  const auto start = Clock::now();
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < arms.size(); ++i) arms[(round + i) % arms.size()](true);
  }
  const double wall_s = double(ns_since(start)) / 1e9;
  if (const auto diff = testing::describe_difference(pristine, testing::snapshot_tree(fixture.root)); !diff.empty()) {
    fail("the rounds did not leave the fixture as it was:\n" + diff);
  }

  std::printf(
      "device preparation of gx3d-160x1792x8h100 on simulated vela2 over the fake kernel: %zu devices "
      "(%zu GPUs, %zu VFs, %zu NVMe) in %zu IOMMU groups, %zu VFs configured, %zu ACS/ATS registers set\n",
      vm.passthrough.size(), vm.placement.gpus.size(), vf_list.size(), vm.placement.nvme.size(), leaders.size(),
      vf_list.size(), registers);
  std::printf("%d rounds interleaved, %.1f s; load average before %s, after %s (%ld CPUs)\n", rounds, wall_s,
              load_before.c_str(), load_average().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("  %-52s %8s %8s %9s %8s\n", "(ms)", "median", "p90", "x inspect", "x replay");
  const Samples disk_total = sum(on_disk.prepare, on_disk.release);
  const Samples tmpfs_total = sum(on_tmpfs.prepare, on_tmpfs.release);
  print_row("daemon preparer prepare+release, records on disk", disk_total, inspect_ms, replay_ms);
  print_row("  prepare", on_disk.prepare, inspect_ms, replay_ms);
  print_row("  release", on_disk.release, inspect_ms, replay_ms);
  print_row("daemon preparer prepare+release, records on tmpfs", tmpfs_total, inspect_ms, replay_ms);
  print_row("  prepare", on_tmpfs.prepare, inspect_ms, replay_ms);
  print_row("  release", on_tmpfs.release, inspect_ms, replay_ms);
  print_row("start's reapply, all in place (records on tmpfs)", reapply.in_place, inspect_ms, replay_ms);
  print_row("start's reapply after a host reboot (records on tmpfs)", reapply.rebooted, inspect_ms, replay_ms);
  print_row("parts alone: vfio bind_group+release, every group", binder_ms, inspect_ms, replay_ms);
  print_row("parts alone: VF configure+reset, every VF", vf_ms, inspect_ms, replay_ms);
  print_row("parts alone: ACS/ATS p2p_needs+apply+restore", p2p_ms, inspect_ms, replay_ms);
  print_row("baseline (a): inspect_group of every device", inspect_ms, inspect_ms, replay_ms);
  char replay_label[96];
  std::snprintf(replay_label, sizeof(replay_label), "baseline (b): fake kernel replaying the %zu writes",
                replay.size());
  print_row(replay_label, replay_ms, inspect_ms, replay_ms);

  std::printf("OS calls of the daemon preparer, records on disk (%s)\n", scratch.path().c_str());
  print_counts("prepare", on_disk.prepare_counts, on_disk.rounds);
  print_counts("release", on_disk.release_counts, on_disk.rounds);
  std::printf("records on tmpfs (%s)\n", shm.path().c_str());
  print_counts("prepare", on_tmpfs.prepare_counts, on_tmpfs.rounds);
  print_counts("release", on_tmpfs.release_counts, on_tmpfs.rounds);
  std::printf(
      "record durability: disk - tmpfs = %.3f ms of the median prepare+release (disk/tmpfs %.2f); of each "
      "prepare+release on disk the records' fsyncs take %.3f ms (median; p90 %.3f) and their "
      "open/rename/unlink %.3f ms (median; p90 %.3f); on tmpfs %.3f and %.3f ms\n",
      disk_total.median() - tmpfs_total.median(), disk_total.median() / tmpfs_total.median(), on_disk.fsync.median(),
      on_disk.fsync.p90(), on_disk.file_ops.median(), on_disk.file_ops.p90(), on_tmpfs.fsync.median(),
      on_tmpfs.file_ops.median());
  cleaning_section(cleaning_rounds);
  return 0;
}
