// The real-libvirtd fixture. Looks at libvirt through its C API directly (not through hostagent),
// so the tests check hostagent against an independent view.
#include "libvirtd_fixture.hpp"

#include <doctest/doctest.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "hostagent/config/daemon_config.hpp"
#include "libvirtd_support.hpp"
#include "test_guest.hpp"

extern char** environ;

namespace hostagent::testing {

namespace fs = std::filesystem;

struct LibvirtdFixture::Connection {
  virConnectPtr conn = nullptr;
  virStoragePoolPtr pool = nullptr;
  ~Connection() {
    if (pool != nullptr) {
      virStoragePoolDestroy(pool);  // transient: gone with it
      virStoragePoolFree(pool);
    }
    if (conn != nullptr) virConnectClose(conn);
  }
};

namespace {

// QEMU runs as libvirt-qemu: it must be able to walk into the scratch directory to read the
// guest's kernel and write nothing else there (libvirt relabels the files themselves).
void open_for_qemu(const fs::path& dir) {
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
}

std::string config_yaml(const std::string& uri, const fs::path& scratch) {
  return "libvirt:\n  uri: " + uri + "\n  domain_type: qemu\n  connect_timeout: 60s\n  reconnect_interval: 1s\n" +
         "host:\n  sysfs_root: /\n" + "templates:\n  directories: [" + (scratch / "templates").string() + "]\n" +
         "storage:\n  pool: " + LibvirtdFixture::kPool + "\n" + "state_directory: " + (scratch / "state").string() +
         "\n" + "console_log_directory: " + (scratch / "console").string() + "\n" +
         "operations:\n  workers: 4\n  stop_timeout: 60s\n";
}

}  // namespace

std::unique_ptr<LibvirtdFixture> LibvirtdFixture::make() {
  const auto uri = libvirtd_uri_or_skip();
  if (!uri) return nullptr;
  std::unique_ptr<LibvirtdFixture> fixture(new LibvirtdFixture());
  const auto& scratch = fixture->scratch_.path();
  open_for_qemu(scratch);
  const auto guest = build_test_guest(scratch);
  if (!guest) return nullptr;
  fs::create_directories(scratch / "templates");
  fs::create_directories(scratch / "console");
  fs::create_directories(scratch / "pool");
  // The "boot image" each VM's disk is an overlay of.
  const auto base_image = write_test_guest_image(scratch);
  write_test_guest_template(scratch / "templates", kTemplate, *guest, base_image);
  auto deaf = *guest;
  deaf.cmdline += std::string(" ") + kTestGuestDeaf;
  write_test_guest_template(scratch / "templates", kDeafTemplate, deaf, base_image);
  std::ofstream(scratch / "authorized_keys") << "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBxsmSd5 ci@hostagent\n";
  fixture->uri_ = *uri;
  fixture->config_file_ = scratch / "hostagent.yaml";
  std::ofstream(fixture->config_file_) << config_yaml(*uri, scratch);

  fixture->connection_ = std::make_unique<Connection>();
  fixture->connection_->conn = virConnectOpen(uri->c_str());
  REQUIRE_MESSAGE(fixture->connection_->conn != nullptr, virGetLastErrorMessage());
  // A transient pool of our own, so the tests never touch the machine's pools.
  if (virStoragePoolPtr old = virStoragePoolLookupByName(fixture->connection_->conn, kPool)) {
    virStoragePoolDestroy(old);
    virStoragePoolFree(old);
  }
  const std::string pool_xml = std::string("<pool type='dir'><name>") + kPool + "</name><target><path>" +
                               (scratch / "pool").string() + "</path></target></pool>";
  fixture->connection_->pool = virStoragePoolCreateXML(fixture->connection_->conn, pool_xml.c_str(), 0);
  REQUIRE_MESSAGE(fixture->connection_->pool != nullptr, virGetLastErrorMessage());
  return fixture;
}

LibvirtdFixture::~LibvirtdFixture() {
  // A cold CI run lost one boot's guest (not up in 180 s) and the test's failure left the domain
  // running: the next two tests' services adopted it, and failed for its CPUs.
  if (connection_ == nullptr) return;
  for (const auto& name : used_names_) remove_domain(name);
}

fs::path LibvirtdFixture::console_log(const std::string& vm) const {
  return scratch_.path() / "console" / (vm + ".log");
}

Result<std::unique_ptr<service::VmService>> LibvirtdFixture::start_service(std::shared_ptr<daemon::Clock> clock) const {
  HA_TRY(const auto config, config::load_config(config_file_));
  HA_TRY(auto parts, cli::assemble_parts(config));
  if (clock) parts.clock = std::move(clock);
  return daemon::start_service(std::move(parts));
}

bool LibvirtdFixture::domain_exists(const std::string& name) const {
  virDomainPtr domain = virDomainLookupByName(connection_->conn, name.c_str());
  if (domain == nullptr) return false;
  virDomainFree(domain);
  return true;
}

std::string LibvirtdFixture::live_xml(const std::string& name) const {
  virDomainPtr domain = virDomainLookupByName(connection_->conn, name.c_str());
  if (domain == nullptr) return "";
  char* xml = virDomainGetXMLDesc(domain, 0);
  std::string text = xml == nullptr ? "" : xml;
  free(xml);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's allocation
  virDomainFree(domain);
  return text;
}

std::vector<std::string> LibvirtdFixture::pool_volumes() const {
  virStoragePoolRefresh(connection_->pool, 0);
  virStorageVolPtr* volumes = nullptr;
  const int count = virStoragePoolListAllVolumes(connection_->pool, &volumes, 0);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    names.emplace_back(virStorageVolGetName(volumes[i]));
    virStorageVolFree(volumes[i]);
  }
  free(volumes);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's allocation
  return names;
}

std::vector<fs::path> LibvirtdFixture::seed_files() const {
  return files_in(scratch_.path() / "state" / "seeds");
}

std::vector<fs::path> LibvirtdFixture::journal_files() const {
  return files_in(scratch_.path() / "state" / "journal");
}

uint64_t LibvirtdFixture::free_hugepages_2m() {
  std::ifstream file("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  uint64_t pages = 0;
  file >> pages;
  return pages;
}

std::string LibvirtdFixture::wait_for_boot(const std::string& vm, int count, int timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string console = read_text_file(console_log(vm));
    int seen = 0;
    std::size_t last = std::string::npos;
    for (auto at = console.find(kTestGuestUp); at != std::string::npos; at = console.find(kTestGuestUp, at + 1)) {
      ++seen;
      last = at;
    }
    if (seen >= count) return console.substr(last);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  MESSAGE("no \"" << kTestGuestUp << "\" line " << count << " within " << timeout_s << " s"
                  << panic_note(read_text_file(console_log(vm))));
  return "";
}

void LibvirtdFixture::remove_domain(const std::string& name) const {
  used_names_.insert(name);
  testing::remove_domain(uri_, name);
  for (const auto& volume : pool_volumes()) {
    if (virStorageVolPtr vol = virStorageVolLookupByName(connection_->pool, volume.c_str())) {
      virStorageVolDelete(vol, 0);
      virStorageVolFree(vol);
    }
  }
}

DaemonProcess::DaemonProcess(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));  // NOLINT: posix_spawn's type
  args.push_back(nullptr);
  REQUIRE(posix_spawn(&pid_, args[0], nullptr, nullptr, args.data(), environ) == 0);
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) kill_hard();
}

void DaemonProcess::kill_hard() {
  ::kill(pid_, SIGKILL);
  wait();
}

int DaemonProcess::wait() {
  int status = 0;
  if (pid_ > 0) ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

fs::path hostagentd_binary() {
  const char* dir = std::getenv("HOSTAGENT_BINARY_DIR");
  REQUIRE_MESSAGE(dir != nullptr, "HOSTAGENT_BINARY_DIR is not set: run the tests through ctest");
  return fs::path(dir) / "hostagent" / "hostagentd";
}

}  // namespace hostagent::testing
