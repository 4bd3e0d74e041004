// The end-to-end boot's guest side (see e2e_host.hpp).
#include "e2e_host.hpp"

#include <doctest/doctest.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <pugixml.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "../emulated_host.hpp"
#include "../guest/guest_host.hpp"
#include "harness/guest_results.hpp"

namespace hostagent::testing::e2e {
namespace {

namespace fs = std::filesystem;
namespace host = emulated_host;

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.flush();
  REQUIRE_MESSAGE(out.good(), "cannot write " << path.string());
}

std::string hex4(uint16_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%04x", value);
  return text;
}

std::string configuration(const fs::path& dir, const EmulatedDevices& devices,
                          const std::vector<PciAddress>& reserved) {
  std::ostringstream sriov;
  for (const auto& pf : devices.nvme_pfs)
    sriov << "\n    - {pf: \"" << pf.to_string() << "\", vfs: " << kVfsPerPf << "}";
  if (!reserved.empty()) sriov << "\n  reserved:";
  for (const auto& device : reserved)
    sriov << "\n    - {address: \"" << device.to_string() << "\", reason: \"kept out by the test\"}";
  return "libvirt: {uri: \"qemu:///system\", domain_type: qemu, connect_timeout: 120s}\n"
         "host: {sysfs_root: /}\n"
         "templates: {directories: [\"" +
         (dir / "templates").string() + "\"]}\nstate_directory: \"" + (dir / "state").string() +
         "\"\nconsole_log_directory: \"" + (dir / "console").string() +
         "\"\noperations: {workers: 2, stop_timeout: 10s}\n"
         "api: {listen: [\"unix:" +
         (dir / "api.sock").string() +
         "\"], audit_log: \"\"}\n"
         "devices:\n  preparation: hostagent\n  bind_at_start: true\n  gpu_ids: [{vendor: " +
         hex4(host::kEduVendor) + ", device: " + hex4(host::kEduDevice) + "}]\n  sriov:" + sriov.str() + "\n";
}

// A VM as small as the emulated host allows: one vCPU, 64 MiB of 2 MiB pages, no disk, SeaBIOS.
constexpr const char* kVfTemplateYaml = R"(name: e2e-nvme-vf
description: one NVMe VF, for the emulated GPU host's end-to-end run
vcpus: 1
memory: 64MiB
hugepage_size: 2M
nvme: 1
firmware: bios
)";
// QEMU refuses to start it: the domain is defined and its VF prepared before that.
constexpr const char* kBrokenTemplateYaml = R"(name: e2e-no-kernel
extends: e2e-nvme-vf
boot: {kernel: /nonexistent/vmlinuz}
)";

std::string tail_of(const fs::path& file, int lines) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "(" + file.string() + " does not exist)\n";
  std::ostringstream text;
  text << in.rdbuf();
  return kernel::tail_lines(text.str(), lines);
}

struct ConnectionCloser {
  void operator()(virConnectPtr connection) const { virConnectClose(connection); }
};
struct DomainFreer {
  void operator()(virDomainPtr domain) const { virDomainFree(domain); }
};

std::vector<PciAddress> hostdev_addresses(const std::string& xml, bool& all_unmanaged) {
  pugi::xml_document document;
  REQUIRE_MESSAGE(document.load_string(xml.c_str()), "libvirt's domain XML does not parse:\n" << xml);
  std::vector<PciAddress> addresses;
  for (const auto& hostdev : document.select_nodes("/domain/devices/hostdev[@type='pci']")) {
    if (std::string(hostdev.node().attribute("managed").as_string()) != "no") all_unmanaged = false;
    const auto address = hostdev.node().child("source").child("address");
    char text[32];
    std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", address.attribute("domain").as_uint(),
                  address.attribute("bus").as_uint(), address.attribute("slot").as_uint(),
                  address.attribute("function").as_uint());
    auto parsed = PciAddress::parse(text);
    REQUIRE_MESSAGE(parsed.ok(), "hostdev address " << text);
    addresses.push_back(*parsed);
  }
  return addresses;
}

}  // namespace

EmulatedDevices emulated_devices() {
  EmulatedDevices devices;
  for (const auto& pf : guest::pci_functions(host::kNvmeVendor, host::kNvmeDevice)) {
    // A VF has the PF's IDs too; only PFs have sriov_totalvfs.
    if (guest::sysfs().exists(guest::pci_path(pf, "sriov_totalvfs"))) devices.nvme_pfs.push_back(pf);
  }
  devices.gpus = guest::pci_functions(host::kEduVendor, host::kEduDevice);
  return devices;
}

std::vector<PciAddress> virtfns(const PciAddress& pf) {
  std::vector<PciAddress> vfs;
  for (int i = 0;; ++i) {
    const auto vf = guest::sysfs().read_link_name(guest::pci_path(pf, "virtfn" + std::to_string(i))).value();
    if (!vf) break;
    vfs.push_back(PciAddress::parse(*vf).value());
  }
  return vfs;
}

std::vector<PciAddress> all_vfs() {
  std::vector<PciAddress> vfs;
  for (const auto& pf : emulated_devices().nvme_pfs) {
    const auto more = virtfns(pf);
    vfs.insert(vfs.end(), more.begin(), more.end());
  }
  return vfs;
}

void check_vf_idle(const PciAddress& vf) {
  INFO("VF " << vf.to_string());
  CHECK_FALSE(guest::driver_of(vf).has_value());
  CHECK(guest::sysfs().read(guest::pci_path(vf, "driver_override")).value() == "(null)");
}

PciAddress check_vm_holds_a_vf(const DomainView& domain) {
  REQUIRE(domain.hostdevs.size() == 1);
  const PciAddress vf = domain.hostdevs.front();
  INFO("the VM's hostdev " << vf.to_string());
  CHECK(domain.all_unmanaged);
  const auto vfs = all_vfs();
  CHECK(std::find(vfs.begin(), vfs.end(), vf) != vfs.end());
  CHECK(guest::driver_of(vf) == std::optional<std::string>("vfio-pci"));
  CHECK(guest::sysfs().exists("/dev/vfio/" + std::to_string(guest::iommu_group_of(vf))));
  return vf;
}

Daemon::Daemon(const fs::path& dir, const std::string& more_config, const std::vector<PciAddress>& reserved)
    : dir_(dir), config_(dir / "hostagent.yaml") {
  write_file(config_, configuration(dir_, emulated_devices(), reserved) + more_config);
  write_file(dir_ / "templates" / (std::string(kVfTemplate) + ".yaml"), kVfTemplateYaml);
  write_file(dir_ / "templates" / (std::string(kBrokenTemplate) + ".yaml"), kBrokenTemplateYaml);
}

Daemon::~Daemon() {
  if (pid_ > 0) kill_hard();
}

bool Daemon::start(std::chrono::seconds timeout, const std::vector<std::string>& arguments) {
  REQUIRE(pid_ < 0);
  std::vector<std::string> argv = {HOSTAGENT_E2E_HOSTAGENTD, "--config", config_.string()};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  pid_ = spawn_logged(argv, dir_ / "hostagentd.log");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    if (ctl({"host", "show"}).exit_code == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return false;
}

int Daemon::stop() {
  if (pid_ < 0) return -1;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 600; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill_hard();
  return -1;
}

void Daemon::kill_hard() {
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void Daemon::add_template(const std::string& name, const std::string& yaml) const {
  write_file(dir_ / "templates" / (name + ".yaml"), yaml);
}

bool Daemon::has_record(const std::string& owner) const {
  return fs::exists(records_directory() / (owner + ".devices.json"));
}

CommandResult Daemon::ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {HOSTAGENT_E2E_HOSTAGENTCTL, "--socket", (dir_ / "api.sock").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

std::string Daemon::log() const {
  std::ifstream in(dir_ / "hostagentd.log", std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Daemon::log_tail() const {
  return "hostagentd's output (" + (dir_ / "hostagentd.log").string() + "), last lines:\n" +
         tail_of(dir_ / "hostagentd.log", 30);
}

void start_dir_pool(const std::string& name, const fs::path& directory) {
  fs::create_directories(directory);
  const std::unique_ptr<virConnect, ConnectionCloser> connection(virConnectOpen("qemu:///system"));
  REQUIRE_MESSAGE(connection != nullptr, "cannot connect to qemu:///system: " << virGetLastErrorMessage());
  // The test's own names and paths: no markup in them to escape.
  const std::string xml =
      "<pool type='dir'><name>" + name + "</name><target><path>" + directory.string() + "</path></target></pool>";
  virStoragePoolPtr pool = virStoragePoolCreateXML(connection.get(), xml.c_str(), 0);
  REQUIRE_MESSAGE(pool != nullptr, "cannot start pool " << name << ": " << virGetLastErrorMessage());
  virStoragePoolFree(pool);
}

DomainView libvirt_domain(const std::string& name) {
  // A missing domain is an answer here, not an error for libvirt's default handler to print.
  virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});
  const std::unique_ptr<virConnect, ConnectionCloser> connection(virConnectOpen("qemu:///system"));
  REQUIRE_MESSAGE(connection != nullptr, "cannot connect to qemu:///system: " << virGetLastErrorMessage());
  DomainView view;
  const std::unique_ptr<virDomain, DomainFreer> domain(virDomainLookupByName(connection.get(), name.c_str()));
  if (!domain) return view;
  view.exists = true;
  int state = VIR_DOMAIN_NOSTATE;
  int reason = 0;
  REQUIRE(virDomainGetState(domain.get(), &state, &reason, 0) == 0);
  view.running = state == VIR_DOMAIN_RUNNING;
  char* xml = virDomainGetXMLDesc(domain.get(), 0);
  REQUIRE(xml != nullptr);
  const std::string text = xml;
  std::free(xml);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's allocation
  view.hostdevs = hostdev_addresses(text, view.all_unmanaged);
  return view;
}

void destroy_and_undefine(const std::string& name) {
  virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});
  const std::unique_ptr<virConnect, ConnectionCloser> connection(virConnectOpen("qemu:///system"));
  REQUIRE_MESSAGE(connection != nullptr, "cannot connect to qemu:///system: " << virGetLastErrorMessage());
  const std::unique_ptr<virDomain, DomainFreer> domain(virDomainLookupByName(connection.get(), name.c_str()));
  REQUIRE_MESSAGE(domain != nullptr, "no domain " << name << ": " << virGetLastErrorMessage());
  REQUIRE_MESSAGE(virDomainDestroy(domain.get()) == 0, "virDomainDestroy " << name << ": " << virGetLastErrorMessage());
  REQUIRE_MESSAGE(virDomainUndefine(domain.get()) == 0,
                  "virDomainUndefine " << name << ": " << virGetLastErrorMessage());
}

std::string libvirt_logs(const std::string& domain) {
  return "libvirtd.log, last lines:\n" + tail_of("/var/log/libvirt/libvirtd.log", 15) + domain + ".log, last lines:\n" +
         tail_of("/var/log/libvirt/qemu/" + domain + ".log", 15);
}

PciAddress tenant_controller() {
  const auto found = guest::pci_functions(emulated_host::kTenantNvmeVendor, emulated_host::kTenantNvmeDevice);
  REQUIRE_MESSAGE(found.size() == 1, "the emulated host has " << found.size() << " NVMe controllers with Intel's IDs");
  return found.front();
}

std::vector<std::string> tenant_disks() {
  static const std::regex disk("nvme[0-9]+n[0-9]+");
  std::vector<std::string> disks;
  for (const auto& entry : fs::directory_iterator("/sys/block")) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, disk)) continue;
    const auto serial = guest::sysfs().read("/sys/block/" + name + "/device/serial");
    if (serial.ok() && *serial == emulated_host::kTenantNvmeSerial) disks.push_back(name);
  }
  return disks;
}

std::vector<std::string> host_views_of_tenant() {
  const auto disks = tenant_disks();
  std::vector<std::string> views;
  views.reserve(disks.size());
  for (const auto& name : disks) views.push_back("/sys/block/" + name);
  std::ifstream partitions("/proc/partitions");
  for (std::string line; std::getline(partitions, line);) {
    for (const auto& name : disks) {
      if (line.find(name) != std::string::npos) views.push_back("/proc/partitions: " + line);
    }
  }
  return views;
}

void check_host_check_reads_this_kernel() {
  const auto ran = run_command({HOSTAGENT_E2E_HOSTAGENTCTL, "host", "check", "--json"});
  REQUIRE_MESSAGE((ran.exit_code == 0 || ran.exit_code == 1), ran.output);
  std::map<std::string, std::pair<std::string, std::string>> checks;  // name: verdict, found
  bool failed = false;
  const auto answer = boost::json::parse(ran.output);  // kept: the loop below reads into it
  for (const auto& check : answer.at("checks").as_array()) {
    const auto& entry = check.as_object();
    checks[std::string(entry.at("check").as_string())] = {std::string(entry.at("result").as_string()),
                                                          std::string(entry.at("found").as_string())};
    MESSAGE(entry.at("check").as_string()
            << ": " << entry.at("result").as_string() << ": " << entry.at("found").as_string());
    failed = failed || entry.at("result").as_string() == "fail";
  }
  CHECK(ran.exit_code == (failed ? 1 : 0));  // 1 exactly when a check fails
  const auto groups = std::distance(fs::directory_iterator("/sys/kernel/iommu_groups"), fs::directory_iterator());
  REQUIRE(groups > 0);
  CHECK(checks["iommu"].first == "pass");
  CHECK_MESSAGE(checks["iommu"].second.find(std::to_string(groups) + " groups") != std::string::npos,
                checks["iommu"].second);
  CHECK(checks["vfio-pci"].first == "pass");
  CHECK(checks["qemu memlock"].first == "pass");  // /init's libvirtd runs as root
  CHECK_MESSAGE(checks["qemu memlock"].second.find("libvirtd (pid ") == 0, checks["qemu memlock"].second);
  // That libvirtd's versions, which each template is held against (this machine's stack).
  CHECK(checks["libvirt and qemu"].first == "pass");
  CHECK_MESSAGE(checks["libvirt and qemu"].second.starts_with("libvirt "), checks["libvirt and qemu"].second);
  const auto release = guest::sysfs().read("/proc/sys/kernel/osrelease").value();
  int major = 0;
  int minor = 0;
  REQUIRE(std::sscanf(release.c_str(), "%d.%d", &major, &minor) == 2);
  CHECK(checks["kernel"].first == ((major > 6 || (major == 6 && minor >= 12)) ? "pass" : "warn"));
  CHECK(checks["kernel"].second.find("Linux " + release) == 0);
  // With iommu=pt on the boot's command line the host's own DMA skips translation; the boots with a
  // tenant's NVMe controller leave it translated (harness/qemu_command.hpp), a warning.
  const auto cmdline = guest::sysfs().read("/proc/cmdline");
  REQUIRE(cmdline.ok());
  const bool passthrough = (" " + *cmdline).find(" iommu=pt") != std::string::npos;
  CHECK(checks["iommu passthrough"].first == (passthrough ? "pass" : "warn"));
  // No 1 GiB pages reserved at this boot, and the shipped templates use them.
  const auto gigantic = guest::sysfs().read_int("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages");
  REQUIRE(gigantic.ok());
  REQUIRE(*gigantic == 0);
  CHECK(checks["1 GiB pages at boot"].first == "fail");
}

}  // namespace hostagent::testing::e2e
