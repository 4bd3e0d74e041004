// The daemon against the machine's real libvirtd with QEMU (TCG): a configuration for it, the
// bootable test guest as a template, a transient storage pool for the VMs' disks, and ways to look
// at what libvirt and the kernel hold independently of hostagent.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "assembly.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/service/vm_service.hpp"
#include "test_support.hpp"

namespace hostagent::testing {

// The test guest's memory in 2 MiB hugepages: 1 GiB (test_guest.hpp).
inline constexpr uint64_t kGuestHugepages2m = 512;

// The system's clocks, the steady one moved on by shift() as well: a test moves a service past an
// age (a cache's) at once, while everything else it does (QEMU, the guest, libvirt) keeps real time.
class ShiftedClock final : public daemon::Clock {
 public:
  std::chrono::system_clock::time_point now() override { return std::chrono::system_clock::now(); }
  std::chrono::steady_clock::time_point steady_now() override {
    return std::chrono::steady_clock::now() + shift_.load();
  }
  void sleep_for(std::chrono::milliseconds duration) override { std::this_thread::sleep_for(duration); }
  void wait_until(std::condition_variable& changed, std::unique_lock<std::mutex>& lock,
                  std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) override {
    changed.wait_until(lock, deadline - shift_.load(), done);
  }
  void shift(std::chrono::milliseconds by) { shift_ = shift_.load() + by; }

 private:
  std::atomic<std::chrono::steady_clock::duration> shift_{};
};

class LibvirtdFixture {
 public:
  // nullopt (after SKIPPED, or a failure where libvirtd is required) when libvirtd or the guest's
  // kernel and busybox are missing.
  static std::unique_ptr<LibvirtdFixture> make();
  ~LibvirtdFixture();
  LibvirtdFixture(const LibvirtdFixture&) = delete;
  LibvirtdFixture& operator=(const LibvirtdFixture&) = delete;

  const std::filesystem::path& config_file() const { return config_file_; }
  std::filesystem::path console_log(const std::string& vm) const;
  // An authorized_keys file with one key: creates given it get a cloud-init seed (a CD-ROM).
  std::filesystem::path authorized_keys() const { return scratch_.path() / "authorized_keys"; }
  // The seeds the daemon has written and not removed.
  std::vector<std::filesystem::path> seed_files() const;
  static constexpr char kTemplate[] = "ci-guest";  // boots the test guest, with a disk overlay
  // The same guest deaf to shutdown requests (kTestGuestDeaf): no agent, no power button.
  static constexpr char kDeafTemplate[] = "ci-guest-deaf";
  static constexpr const char* kPool = "hostagent-test-pool";

  // A service in this process on the same configuration: what a restarted daemon does; on `clock`
  // when given (the system's otherwise).
  Result<std::unique_ptr<service::VmService>> start_service(std::shared_ptr<daemon::Clock> clock = nullptr) const;

  // libvirt's and the kernel's view, not hostagent's.
  bool domain_exists(const std::string& name) const;
  std::string live_xml(const std::string& name) const;
  std::vector<std::string> pool_volumes() const;
  std::vector<std::filesystem::path> journal_files() const;
  static uint64_t free_hugepages_2m();

  // Waits (bounded) until the console log has `count` of the guest's "up" reports; returns the
  // console from the last one on, or "" on timeout.
  std::string wait_for_boot(const std::string& vm, int count, int timeout_s) const;

  // Removes a domain (and its disk) whatever state it is in: cleanup after a failed check. A test
  // calls it first with each name it uses; the fixture removes those again when it ends, so a test
  // that failed with its guest still running leaves nothing for the next test's service to adopt.
  void remove_domain(const std::string& name) const;

 private:
  LibvirtdFixture() = default;
  TempDir scratch_;
  std::string uri_;
  std::filesystem::path config_file_;
  struct Connection;
  std::unique_ptr<Connection> connection_;
  mutable std::set<std::string> used_names_;  // given to remove_domain: removed again at the end
};

// hostagentd as a child process.
class DaemonProcess {
 public:
  explicit DaemonProcess(const std::vector<std::string>& argv);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  void kill_hard();  // SIGKILL, then reaps it
  int wait();        // exit status
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

std::filesystem::path hostagentd_binary();

}  // namespace hostagent::testing
