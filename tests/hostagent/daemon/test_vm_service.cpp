// The daemon's service against real libvirt (the in-process test:/// driver) on the simulated
// Vela 2 host: operations, rollback, restarts, events.
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "daemon_fixture.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/numa/p2p_isolation.hpp"
#include "hostagent/state/vm_record.hpp"
#include "hostagent/vfio/config_space_access.hpp"
#include "hostagent/vfio/p2p_settings.hpp"
#include "iso_reader.hpp"

namespace hostagent::testing {

TEST_CASE("create places the Vela 2 training VM, defines it with its record and starts it") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto vm = create_vm(*service, fixture.request("train-0", kEightGpus));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  CHECK(vm->state == "running");
  CHECK(vm->managed);
  CHECK(vm->operation.empty());
  REQUIRE(vm->record.has_value());
  CHECK(vm->record->template_name == kEightGpus);
  CHECK(vm->record->allocation.cpus.size() == 160);
  CHECK(vm->record->allocation.devices.size() >= 16);  // 8 GPUs and 8 VFs, with any group companions
  uint64_t pages = 0;
  for (const auto& [node, count] : vm->record->allocation.hugepages) pages += count;
  CHECK(pages == 1792);

  // What libvirt holds says the same: the record went in with the definition.
  auto domain = fixture.start().value();  // a second service reads libvirt afresh
  auto seen = domain->get_vm("train-0");
  REQUIRE(seen.ok());
  REQUIRE(seen->record.has_value());
  CHECK(seen->record->allocation.cpus == vm->record->allocation.cpus);
  CHECK(seen->record->allocation.devices == vm->record->allocation.devices);
  CHECK(seen->uuid == vm->uuid);
}

TEST_CASE("create records each VF's RDMA side as the host saw it, and the NCCL topology carries its GUID") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto vm = create_vm(*service, fixture.request("rdma-0", kEightGpus));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  REQUIRE(vm->record.has_value());
  // vela2's VFs are on mlx5_core, each with an RDMA device: a RoCE v2 GID at index 1 (its
  // link-local address; the simulated host gives the VF netdevs no IP).
  const auto& rdma = vm->record->rdma;
  REQUIRE(rdma.size() == 8);
  const auto sysfs = SysfsRoot::open(fixture.config().state_directory / "simulated-host").value();
  for (const auto& entry : rdma) {
    CAPTURE(entry.vf.to_string());
    CHECK(std::count(vm->record->allocation.devices.begin(), vm->record->allocation.devices.end(), entry.vf) == 1);
    CHECK(sysfs.exists("/sys/bus/pci/devices/" + entry.vf.to_string() + "/infiniband/" + entry.host_device));
    CHECK(entry.state == "ACTIVE");
    CHECK(entry.link_layer == "Ethernet");
    CHECK(entry.roce_v2_gid_index == std::optional<int>(1));
    CHECK(entry.node_guid == sysfs.read("/sys/class/infiniband/" + entry.host_device + "/node_guid").value());
    std::string guid = "0x" + entry.node_guid;
    guid.erase(std::remove(guid.begin(), guid.end(), ':'), guid.end());
    CHECK(vm->record->nccl_topology.find("guid=\"" + guid + "\"") != std::string::npos);
  }
  // A restarted daemon reads it back from the domain's metadata.
  auto again = fixture.start().value()->get_vm("rdma-0");
  REQUIRE(again.ok());
  REQUIRE(again->record.has_value());
  CHECK(again->record->rdma == rdma);
}

// libvirt fails a VM's start when the directory of its serial log is missing: the service makes it
// (found by the end-to-end run in the emulated host, tests/kernel/e2e/).
TEST_CASE("the service creates the console log directory at start, and says so when it cannot") {
  DaemonFixture fixture;
  const auto console = fixture.config().console_log_directory;
  std::filesystem::remove_all(console);
  REQUIRE_FALSE(std::filesystem::exists(console));
  auto service = started(fixture);
  CHECK(std::filesystem::is_directory(console));
  CHECK((std::filesystem::status(console).permissions() & std::filesystem::perms::others_all) ==
        std::filesystem::perms::none);
  service.reset();

  // A file where the directory should be: the start fails and names the path.
  std::filesystem::remove_all(console);
  std::ofstream(console) << "not a directory";
  const auto refused = fixture.start();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find(console.string()) != std::string::npos);
  CHECK(refused.error().message.find("console log directory") != std::string::npos);
}

TEST_CASE("a VM goes through stop, start, reboot and delete, and the domain is gone after") {
  DaemonFixture fixture;
  auto service = started(fixture);
  REQUIRE(create_vm(*service, fixture.request("life-0", kOneGpu)).ok());
  auto stopped = stop_vm(*service, "life-0", false);
  REQUIRE_MESSAGE(stopped.ok(), stopped.error().message);
  CHECK(stopped->state == "shut_off");
  auto again = start_vm(*service, "life-0");
  REQUIRE_MESSAGE(again.ok(), again.error().message);
  CHECK(again->state == "running");
  CHECK(start_vm(*service, "life-0").ok());  // starting a running VM is done already
  auto rebooted = reboot_vm(*service, "life-0");
  REQUIRE_MESSAGE(rebooted.ok(), rebooted.error().message);
  CHECK(rebooted->state == "running");
  auto deleted = delete_vm(*service, "life-0");
  REQUIRE_MESSAGE(deleted.ok(), deleted.error().message);
  CHECK(service->get_vm("life-0").error().code == ErrorCode::not_found);
  CHECK(test_driver_domains("life-").empty());
  CHECK(fixture.journal_files().empty());
}

TEST_CASE("a guest that ignores the ACPI request is forced off after the stop timeout") {
  DaemonFixture fixture;
  FaultyHypervisor* faulty = nullptr;
  auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, &faulty, clock);
  REQUIRE(create_vm(*service, fixture.request("stubborn", kOneGpu)).ok());
  faulty->ignore_shutdown();
  auto stopped = stop_vm(*service, "stubborn", false);
  REQUIRE_MESSAGE(stopped.ok(), stopped.error().message);
  CHECK(stopped->state == "shut_off");
  CHECK(faulty->calls("shutdown") == 1);
  CHECK(faulty->calls("destroy") == 1);
  CHECK(clock->slept() >= fixture.config().stop_timeout);
}

TEST_CASE("a VM's figures come from one libvirt call for every VM, kept for kVmStatsMaxAge while no VM changes") {
  DaemonFixture fixture;
  FaultyHypervisor* faulty = nullptr;
  auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, &faulty, clock);
  REQUIRE(create_vm(*service, fixture.request("a", kOneGpu)).ok());
  REQUIRE(create_vm(*service, fixture.request("b", kTwoGpus)).ok());
  const int before = faulty->calls("all_stats");
  auto stats = service->vm_stats();
  REQUIRE_MESSAGE(stats.ok(), stats.error().message);
  REQUIRE(stats->size() == 2);  // hostagent's VMs only: test:///default's own "test" is not one
  CHECK(stats->at(0).vm == "a");
  CHECK(stats->at(0).state == "running");
  CHECK(stats->at(0).devices.at("gpu") == 1);
  CHECK(stats->at(1).devices.at("gpu") == 2);
  CHECK_FALSE(stats->at(0).cpu_seconds.has_value());  // the test driver reports the state alone
  // Within the age, every reader is answered from the one read; past it, libvirt is asked again.
  REQUIRE(service->vm_stats().ok());
  CHECK(faulty->calls("all_stats") == before + 1);
  // A VM deleted within the age is read again at once: its figures are never shown after it went.
  REQUIRE(delete_vm(*service, vm_name("b")).ok());
  stats = service->vm_stats();
  REQUIRE(stats.ok());
  CHECK(faulty->calls("all_stats") == before + 2);
  CHECK(stats->size() == 1);
  REQUIRE(service->vm_stats().ok());
  CHECK(faulty->calls("all_stats") == before + 2);
  clock->advance_steady(service::kVmStatsMaxAge);
  REQUIRE(stop_vm(*service, vm_name("a"), true).ok());
  stats = service->vm_stats();
  REQUIRE(stats.ok());
  CHECK(faulty->calls("all_stats") == before + 3);
  CHECK(stats->at(0).state == "shut_off");
  // libvirt away: the error, not figures from before.
  clock->advance_steady(service::kVmStatsMaxAge);
  faulty->fail("all_stats", ErrorCode::unavailable, 1);
  CHECK(service->vm_stats().error().code == ErrorCode::unavailable);
}

TEST_CASE("force stop skips the ACPI request") {
  DaemonFixture fixture;
  FaultyHypervisor* faulty = nullptr;
  auto service = started(fixture, &faulty);
  REQUIRE(create_vm(*service, fixture.request("forced", kOneGpu)).ok());
  auto stopped = stop_vm(*service, "forced", true);
  REQUIRE(stopped.ok());
  CHECK(stopped->state == "shut_off");
  CHECK(faulty->calls("shutdown") == 0);
}

// "resume": QEMU started paused, and its vCPUs could not be run: the paused domain goes too.
TEST_CASE("a create that fails at each step rolls back everything before it") {
  for (const std::string step : {"disk", "prepare_devices", "define", "start_paused", "resume"}) {
    CAPTURE(step);
    DaemonFixture fixture;
    FaultyHypervisor* faulty = nullptr;
    auto service = started(fixture, &faulty);
    const auto name = testing::vm_name("doomed-" + step);
    if (step == "prepare_devices") fixture.devices()->fail_prepare = true;
    if (step == "disk") faulty->fail("create_overlay", ErrorCode::internal, 1);
    if (step == "define" || step == "start_paused" || step == "resume") faulty->fail(step, ErrorCode::internal, 1);
    auto vm = create_vm(*service, fixture.request(name, kEightGpus));
    REQUIRE_FALSE(vm.ok());
    CHECK_MESSAGE(vm.error().message.find("injected failure") != std::string::npos, vm.error().message);
    CHECK(service->get_vm(name).error().code == ErrorCode::not_found);
    CHECK(test_driver_domains("doomed").empty());
    CHECK(fixture.devices()->prepared.empty());
    CHECK(fixture.journal_files().empty());
    CHECK(service->status().last_reconcile.problems.empty());
    // Everything went back: the same 8 GPUs can be placed again, and the disk made again.
    fixture.devices()->fail_prepare = false;
    auto retry = create_vm(*service, fixture.request(name, kEightGpus));
    CHECK_MESSAGE(retry.ok(), retry.error().message);
    CHECK(delete_vm(*service, name).ok());
  }
}

// The guest is rendered once, before the first step: a request it cannot be rendered from (here,
// three MACs for the one VF the template gives) is refused with no disk, seed or device touched.
TEST_CASE("a guest that cannot be rendered is refused before anything is made") {
  DaemonFixture fixture;
  FaultyHypervisor* faulty = nullptr;
  auto service = started(fixture, &faulty);
  auto request = fixture.request("unrenderable", kOneGpu);
  request.macs = {"02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:03"};
  request.ssh_authorized_keys = {"ssh-ed25519 AAAA k"};
  const auto refused = create_vm(*service, request);
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.error().message.find("MAC") != std::string::npos, refused.error().message);
  CHECK(faulty->calls("create_overlay") == 0);
  CHECK(faulty->calls("define") == 0);
  CHECK(fixture.devices()->prepared.empty());
  CHECK(fixture.journal_files().empty());
  CHECK(service->get_vm("unrenderable").error().code == ErrorCode::not_found);
  // What it reserved went back: the same request with one MAC is placed and made.
  request.macs = {"02:00:00:00:00:01"};
  const auto made = create_vm(*service, request);
  CHECK_MESSAGE(made.ok(), made.error().message);
}

// A service whose next create fails at start and whose rollback cannot undefine the domain: that
// create stays in the journal for the next start to finish.
std::unique_ptr<service::VmService> service_that_leaves_a_create(DaemonFixture& fixture) {
  FaultyHypervisor* faulty = nullptr;
  auto service = started(fixture, &faulty);
  faulty->fail("start_paused", ErrorCode::internal, 1);
  faulty->fail("undefine", ErrorCode::unavailable);
  return service;
}

TEST_CASE("a rollback cut short keeps the reservation and the journal until a restart finishes it") {
  DaemonFixture fixture;
  auto service = service_that_leaves_a_create(fixture);
  auto vm = create_vm(*service, fixture.request("halfway", kEightGpus));
  REQUIRE_FALSE(vm.ok());
  CHECK(vm.error().message.find("rollback incomplete") != std::string::npos);
  CHECK(fixture.journal_files().size() == 1);
  // Still held: a second 8-GPU VM does not fit on Vela 2.
  auto second = create_vm(*service, fixture.request("second", kEightGpus));
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == ErrorCode::does_not_fit);
  service.reset();

  auto restarted = started(fixture);
  const auto report = restarted->status().last_reconcile;
  CHECK(report.rolled_back == std::vector<std::string>{"create halfway"});
  CHECK(fixture.journal_files().empty());
  CHECK(test_driver_domains("halfway").empty());
  CHECK(create_vm(*restarted, fixture.request("second", kEightGpus)).ok());
}

// The journal as each step of create and delete begins: written when what a crash would leave
// reconcile to do changes (daemon/operation), not before every step.
class JournalAtEachStep final : public daemon::StepHook {
 public:
  explicit JournalAtEachStep(const DaemonFixture& fixture) : fixture_(fixture) {}
  void before_step(const std::string& operation, const std::string& /*vm*/, const std::string& step) override {
    const auto files = fixture_.journal_files();
    const std::lock_guard lock(mutex_);
    seen_[operation].push_back(
        {step, files.size() == 1 ? read_text_file(files[0]) : "(" + std::to_string(files.size()) + " entries)"});
  }
  std::vector<std::pair<std::string, std::string>> of(const std::string& operation) {
    const std::lock_guard lock(mutex_);
    return seen_[operation];
  }

 private:
  const DaemonFixture& fixture_;
  std::mutex mutex_;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> seen_;
};

TEST_CASE("a create journals its entry before its first step and at commit, a delete before its first step only") {
  DaemonFixture fixture;
  auto journal = std::make_shared<JournalAtEachStep>(fixture);
  fixture.hook = journal;
  auto service = started(fixture);
  REQUIRE(create_vm(*service, fixture.request("once", kEightGpus)).ok());
  REQUIRE(delete_vm(*service, "once").ok());
  CHECK(fixture.journal_files().empty());

  const auto create = journal->of("create");
  REQUIRE(create.size() == 6);  // disk, seed, prepare_devices, define, start, commit
  for (std::size_t i = 1; i + 1 < create.size(); ++i) {
    CAPTURE(create[i].first);
    CHECK(create[i].second == create[0].second);  // not rewritten: the first step's entry
  }
  CHECK(contains(create[0].second, "\"current_step\":\"disk\""));
  CHECK(create.back().first == "commit");
  CHECK(contains(create.back().second, "\"current_step\":\"commit\""));
  CHECK(contains(create.back().second, "\"steps_done\":[\"disk\",\"seed\",\"prepare_devices\",\"define\",\"start\"]"));

  const auto remove = journal->of("delete");
  REQUIRE(remove.size() == 6);  // destroy, undefine, delete_disk, delete_seed, release_devices, commit
  CHECK(contains(remove[0].second, "\"kind\":\"delete\""));
  for (const auto& entry : remove) {  // not a structured binding: clang 14 cannot capture one in CAPTURE
    CAPTURE(entry.first);
    CHECK(entry.second == remove[0].second);
  }
}

TEST_CASE("a journal entry naming a step this version does not know stops the start, naming the file") {
  DaemonFixture fixture;
  auto service = service_that_leaves_a_create(fixture);
  REQUIRE_FALSE(create_vm(*service, fixture.request("skewed", kEightGpus)).ok());
  service.reset();
  const auto files = fixture.journal_files();
  REQUIRE(files.size() == 1);
  // As a newer hostagent might leave it: a step the running version has no undo for.
  std::string text = read_text_file(files[0]);
  const auto at = text.find("\"current_step\":\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, text.find('"', at + 16) - at + 1, "\"current_step\":\"snapshot\"");
  write_text_file(files[0], text);

  auto restarted = fixture.start();  // an abort here would end the test binary
  REQUIRE_FALSE(restarted.ok());
  CHECK(restarted.error().code == ErrorCode::parse_error);
  CHECK(contains(restarted.error().message, files[0].string()));
  CHECK(contains(restarted.error().message, "\"snapshot\""));
  CHECK(fixture.journal_files() == files);  // left for the operator, not removed or rewritten
}

TEST_CASE("a restarted daemon adopts its VMs, reports foreign domains and keeps allocations") {
  DaemonFixture fixture;
  std::vector<service::VmView> made;
  {
    auto service = started(fixture);
    for (const std::string name : {"keep-0", "keep-1"}) {
      auto vm = create_vm(*service, fixture.request(name, kOneGpu));
      REQUIRE(vm.ok());
      made.push_back(*vm);
    }
    REQUIRE(stop_vm(*service, "keep-1", true).ok());
  }
  auto service = started(fixture);
  const auto report = service->status().last_reconcile;
  CHECK(report.adopted == std::vector<std::string>{"keep-0", "keep-1"});
  // libvirt's test driver comes with a domain called "test": not ours, reported, never touched.
  CHECK(report.foreign == std::vector<std::string>{"test"});
  for (const auto& before : made) {
    auto after = service->get_vm(testing::vm_name(before.name));
    REQUIRE(after.ok());
    CHECK(after->record->allocation.cpus == before.record->allocation.cpus);
    CHECK(after->record->allocation.devices == before.record->allocation.devices);
    CHECK(after->record->allocation.hugepages == before.record->allocation.hugepages);
  }
  CHECK(service->get_vm("keep-1")->state == "shut_off");
  auto foreign = delete_vm(*service, "test");
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.error().code == ErrorCode::conflict);
}

TEST_CASE("a peer-to-peer VM's relaxed ports are recorded, survive a restart and keep others off its switches") {
  DaemonFixture fixture;
  numa::Allocation held;
  {
    auto service = started(fixture);
    auto vm = create_vm(*service, fixture.request("p2p", kTwoGpus));
    REQUIRE_MESSAGE(vm.ok(), vm.error().message);
    held = vm->record->allocation;
    // Two switches, each with its root port and the GPU's and NIC's downstream ports.
    CHECK(held.p2p_ports.size() == 6);
    auto quiet = create_vm(*service, fixture.request("quiet", kOneGpu));
    REQUIRE_MESSAGE(quiet.ok(), quiet.error().message);
    CHECK(quiet->record->allocation.p2p_ports.empty());  // the 1-GPU template does not ask
  }
  auto service = started(fixture);
  auto after = service->get_vm("p2p");
  REQUIRE(after.ok());
  CHECK(after->record->allocation.p2p_ports == held.p2p_ports);
  // Nothing the next VM gets lies below a port relaxed for p2p.
  const auto host = service->host_now();
  std::set<numa::PciAddress> fenced;
  for (const auto& port : held.p2p_ports) {
    for (const auto& device : numa::p2p_domain(host, port)) fenced.insert(device);
  }
  auto next = create_vm(*service, fixture.request("next", kOneGpu));
  REQUIRE_MESSAGE(next.ok(), next.error().message);
  for (const auto& device : next->record->allocation.devices) CHECK(fenced.count(device) == 0);
}

TEST_CASE("the template's VF MTU reaches the seed's network-config, each VF by the MAC the domain gives it") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto& shape = service->templates().at(kTwoGpus);
  REQUIRE(shape.nics.vf.mtu == std::optional<int>(9000));  // base-h100's
  auto vm = create_vm(*service, fixture.request("mtu", kTwoGpus));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  REQUIRE_FALSE(vm->record->cloud_init_seed.empty());
  const auto seed = cloudinit::testing::read_iso(vm->record->cloud_init_seed);
  REQUIRE(seed.files.count("network-config") == 1);
  const auto network = YAML::Load(seed.files.at("network-config"));
  std::vector<std::string> seeded;
  for (const auto& entry : network["ethernets"]) {
    CHECK(entry.second["mtu"].as<int>() == 9000);
    seeded.push_back(entry.second["match"]["macaddress"].as<std::string>());
  }
  // The domain's VF MACs, in its order.
  const auto xml = service->domain_xml(testing::vm_name("mtu"));
  REQUIRE(xml.ok());
  std::vector<std::string> domain_macs;
  for (std::size_t at = xml->find("<mac address='"); at != std::string::npos;
       at = xml->find("<mac address='", at + 1)) {
    domain_macs.push_back(xml->substr(at + 14, 17));
  }
  CHECK(domain_macs.size() == 2);  // one VF per GPU
  CHECK(seeded == domain_macs);
}

// The seed's vendor-data, a script of `put 'PATH' <<'HOSTAGENT_FILE'` blocks: each file's bytes,
// decoded by coreutils' base64 as the guest's cloud-init would run it.
std::map<std::string, std::string> vendor_files(const std::string& script, const std::filesystem::path& scratch) {
  std::map<std::string, std::string> out;
  const std::string head = "put '";
  for (std::size_t at = script.find(head); at != std::string::npos; at = script.find(head, at + 1)) {
    const auto path_end = script.find('\'', at + head.size());
    const std::string path = script.substr(at + head.size(), path_end - at - head.size());
    const auto body = script.find('\n', path_end) + 1;
    const auto end = script.find("\nHOSTAGENT_FILE\n", body);
    testing::write_text_file(scratch / "b64", script.substr(body, end - body + 1));
    const auto decoded = testing::run_command({"base64", "-d", (scratch / "b64").string()});
    REQUIRE(decoded.exit_code == 0);
    out[path] = decoded.output;
  }
  return out;
}

TEST_CASE("a GPU VM's seed writes its NCCL topology file and /etc/nccl.conf naming it, apart from the user data") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto vm = create_vm(*service, fixture.request("nccl", kTwoGpus));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  REQUIRE_FALSE(vm->record->cloud_init_seed.empty());
  const auto seed = cloudinit::testing::read_iso(vm->record->cloud_init_seed);
  REQUIRE(seed.files.count("vendor-data") == 1);
  testing::TempDir scratch;
  const auto files = vendor_files(seed.files.at("vendor-data"), scratch.path());
  // Two of Vela-2's eight GPUs without its NVSwitches: the nvidia module's options turn NVLink off,
  // and the record says so.
  REQUIRE(files.size() == 3);
  CHECK(files.at("/etc/modprobe.d/hostagent-nvidia.conf").find("\noptions nvidia NVreg_NvLinkDisable=1\n") !=
        std::string::npos);
  CHECK(seed.files.at("vendor-data").find("\nreload 'nvidia'\n") != std::string::npos);
  CHECK(vm->record->nvlink.find("its seed loads the guest's nvidia driver with NVreg_NvLinkDisable=1") !=
        std::string::npos);
  const auto topology = service->nccl_topology(testing::vm_name("nccl"));
  REQUIRE(topology.ok());
  CHECK(files.at("/etc/nccl/hostagent-topology.xml") == *topology);
  const auto& conf = files.at("/etc/nccl.conf");
  CHECK(conf.find("NCCL_TOPO_FILE=/etc/nccl/hostagent-topology.xml\n") != std::string::npos);
  CHECK(conf.find("NCCL_IB_PCI_RELAXED_ORDERING=1\n") != std::string::npos);
  CHECK(seed.files.at("user-data").find("hostagent-topology") == std::string::npos);
}

// A bad name cannot reach the service: the request carries a VmName, refused where the text came
// in (common's and the API's suites).
TEST_CASE("bad requests are refused with the field named and nothing held") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto unknown = create_vm(*service, fixture.request("vm", "gx9-nope"));
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == ErrorCode::not_found);
  CHECK(unknown.error().message.find(kEightGpus) != std::string::npos);  // lists what exists
  auto relative = fixture.request("vm", kOneGpu);
  relative.boot_image = "images/x.qcow2";
  CHECK(create_vm(*service, relative).error().code == ErrorCode::invalid_argument);
  CHECK(service->list_vms().size() == 1);  // libvirt's own "test" domain only
}

TEST_CASE("a name in use is a conflict, and a retried create with the same request id is not") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto first = fixture.request("dup", kOneGpu);
  first.request_id = "req-1";
  REQUIRE(create_vm(*service, first).ok());
  auto retry = create_vm(*service, first);
  REQUIRE_MESSAGE(retry.ok(), retry.error().message);
  CHECK(retry->name == "dup");
  auto other = fixture.request("dup", kOneGpu);
  other.request_id = "req-2";
  CHECK(create_vm(*service, other).error().code == ErrorCode::conflict);
  CHECK(create_vm(*service, fixture.request("test", kOneGpu)).error().code ==
        ErrorCode::conflict);  // a foreign domain's name
}

TEST_CASE("a second 8-GPU VM does not fit on Vela 2 and says what is missing") {
  DaemonFixture fixture;
  auto service = started(fixture);
  REQUIRE(create_vm(*service, fixture.request("big-0", kEightGpus)).ok());
  auto second = create_vm(*service, fixture.request("big-1", kEightGpus));
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == ErrorCode::does_not_fit);
  CHECK(second.error().message.find("big-0") != std::string::npos);  // who holds it
  REQUIRE(delete_vm(*service, "big-0").ok());
  CHECK(create_vm(*service, fixture.request("big-1", kEightGpus)).ok());
}

TEST_CASE("a domain stopped outside hostagent is seen through libvirt's events") {
  DaemonFixture fixture;
  auto service = started(fixture);
  REQUIRE(create_vm(*service, fixture.request("watched", kOneGpu)).ok());
  auto outside = fixture.start().value();  // another client of the same libvirt
  // The second service adopts the same domain; stopping it there is "outside" the first one.
  REQUIRE(stop_vm(*outside, "watched", true).ok());
  std::string state;
  for (int i = 0; i < 500 && state != "shut_off"; ++i) {  // events are asynchronous; bounded wait
    state = service->get_vm("watched")->state;
    if (state != "shut_off") std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(state == "shut_off");
  CHECK(service->get_vm("watched")->last_event.rfind("stopped", 0) == 0);
}

// Undefined with libvirt directly: nothing of hostagent's ran, yet the VM's devices are released at
// once through its record, and what it held is free; a release that fails keeps them held.
TEST_CASE("a domain undefined outside hostagent has its devices released at once, or kept held if that fails") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto prepared = [&](const std::string& vm) {
    std::lock_guard lock(fixture.devices()->mutex);
    return fixture.devices()->prepared.count(vm) == 1;
  };
  const auto failed_releases = [&] {
    std::lock_guard lock(fixture.devices()->mutex);
    return fixture.devices()->failed_releases;
  };
  const auto wait_until = [](const std::function<bool()>& done) {
    for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done();
  };
  for (const std::string name : {"gone-0", "stuck-0"})
    REQUIRE(create_vm(*service, fixture.request(name, kOneGpu)).ok());
  REQUIRE(prepared("gone-0"));
  REQUIRE(service->usage().held.size() == 2);

  REQUIRE(fixture.libvirt().destroy("gone-0").ok());
  REQUIRE(fixture.libvirt().undefine("gone-0").ok());
  CHECK(wait_until([&] { return !prepared("gone-0"); }));
  CHECK(wait_until([&] { return !service->get_vm("gone-0").ok(); }));
  CHECK(service->usage().held.size() == 1);

  const auto fail_release = [&](bool fail) {
    std::lock_guard lock(fixture.devices()->mutex);  // read under it, on the thread that resyncs
    fixture.devices()->fail_release = fail;
  };
  fail_release(true);
  REQUIRE(fixture.libvirt().destroy("stuck-0").ok());
  REQUIRE(fixture.libvirt().undefine("stuck-0").ok());
  // The release is tried at once and fails: the devices stay held rather than given away.
  REQUIRE(wait_until([&] { return failed_releases() > 0; }));
  CHECK(prepared("stuck-0"));
  CHECK(service->get_vm("stuck-0").ok());
  CHECK(service->usage().held.size() == 1);
  fail_release(false);
}

TEST_CASE("SSH keys reach the guest in a cloud-init seed, which goes with the VM and with a rollback") {
  DaemonFixture fixture;
  FaultyHypervisor* faulty = nullptr;
  auto service = started(fixture, &faulty);
  auto request = fixture.request("seeded", kOneGpu);
  request.ssh_authorized_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBxsmSd5 alice@laptop"};
  auto vm = create_vm(*service, request);
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  const std::filesystem::path seed = vm->record->cloud_init_seed;
  CHECK(std::filesystem::is_regular_file(seed));
  CHECK(test_driver_xml("seeded").find("<source file='" + seed.string() + "'") != std::string::npos);
  REQUIRE(delete_vm(*service, "seeded").ok());
  CHECK_FALSE(std::filesystem::exists(seed));

  faulty->fail("define", ErrorCode::internal, 1);
  REQUIRE_FALSE(create_vm(*service, request).ok());
  CHECK_FALSE(std::filesystem::exists(seed));

  request.user_data = "#cloud-config\n";
  auto both = create_vm(*service, request);
  REQUIRE_FALSE(both.ok());
  CHECK(both.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("host_now reads ACS and ATS from config space as they are now, at most once a second") {
  DaemonFixture fixture;
  const auto tree = fixture.own_host_tree();
  auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  const auto discovered = service->usage();
  REQUIRE(discovered.host != nullptr);
  const auto port = std::find_if(discovered.host->pci_devices.begin(), discovered.host->pci_devices.end(),
                                 [](const numa::PciFunction& f) { return f.acs.has_value(); });
  REQUIRE(port != discovered.host->pci_devices.end());
  CHECK(service->host_now().find(port->address)->acs->control == port->acs->control);

  // What device preparation does to a port, done here by hand on the simulated host's tree.
  auto config = vfio::make_libpci_config_space(tree);
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  const auto acs = (*config)->find_ext_capability(port->address, 0x0d);  // PCI_EXT_CAP_ID_ACS
  REQUIRE(acs.ok());
  REQUIRE(acs->has_value());
  const uint16_t changed = port->acs->control ^ vfio::kAcsDirectTranslated;
  REQUIRE((*config)->write16(port->address, **acs + 6, changed).ok());

  // Within the second: the report read before.
  CHECK(service->host_now().find(port->address)->acs->control == port->acs->control);
  clock->sleep_for(std::chrono::seconds(1));
  CHECK(service->host_now().find(port->address)->acs->control == changed);
  CHECK(service->usage().host->find(port->address)->acs->control == port->acs->control);  // the model as discovered
}

namespace {

uint64_t pool_total(const numa::HostModel& host, int node, uint64_t page_size) {
  for (const auto& numa_node : host.numa_nodes) {
    if (numa_node.id != node) continue;
    for (const auto& pool : numa_node.hugepages) {
      if (pool.page_size_bytes == page_size) return pool.total;
    }
  }
  FAIL("node " << node << " has no pool of " << page_size << " bytes");
  return 0;
}

}  // namespace

TEST_CASE("host.hugepages raises a node's pool at start, and what placement sees is the raised pool") {
  constexpr uint64_t k1G = 1ULL << 30;
  DaemonFixture fixture;
  fixture.own_host_tree();  // the first start reads the tree the second raises a pool in
  const auto before = pool_total(started(fixture)->host_now(), 1, k1G);
  fixture.hugepages = {{1, k1G, before + 4}};
  auto service = started(fixture);
  CHECK(pool_total(service->host_now(), 1, k1G) == before + 4);
  CHECK(pool_total(*service->usage().host, 1, k1G) == before + 4);  // the model placement reads
}

TEST_CASE("host.hugepages naming a node the host lacks stops the start, naming the key") {
  DaemonFixture fixture;
  fixture.hugepages = {{7, 1ULL << 30, 8}};
  const auto refused = fixture.start();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::not_found);
  CHECK_MESSAGE(refused.error().message.find("host.hugepages: node 7 has no pool of 1 GiB pages") == 0,
                refused.error().message);
}

}  // namespace hostagent::testing
