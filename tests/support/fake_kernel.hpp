// Test helper: a SysfsWriter over a fixture tree (a simulated host's root) that does, on each write,
// what the kernel does: libvirt's tests/virpcimock.c, as an object rather than an LD_PRELOAD. The
// base routes a write to the model registered for that attribute; models of the PCI driver core,
// SR-IOV and resets live beside it (fake_pci_drivers.hpp, fake_sriov.hpp) and are installed by the
// suites that need them. A write nobody models stores the value, as a plain attribute would.
//
// Fault injection fails the Nth write matching a pattern before anything changes, as the kernel does
// when a store() handler returns an error, so every step of a multi-step preparation can be made to
// fail and the rollback checked against a snapshot of the tree.
//
// Writes may come from several threads, as the daemon's parallel cleanings make them: each is
// handled whole under one lock (the models' state included). A model that waits as the kernel
// does (a reset its driver holds) waits through unlocked(), so that writes to other attributes go on.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/sysfs_writer.hpp"

namespace hostagent::testing {

class FakeKernel final : public SysfsWriter {
 public:
  // The model of one attribute: called with the kernel path ("/sys/bus/pci/drivers_probe") and
  // the value as written (trailing newline included, as userspace sends it). Returns the kernel's
  // answer; an Error built with sysfs_write_error(errno, ...) is what a real refusal looks like.
  using Model = std::function<Status(FakeKernel& kernel, const std::string& kernel_path, std::string_view value)>;

  explicit FakeKernel(std::filesystem::path root);

  Status write(const std::string& kernel_path, std::string_view value) override;
  const std::filesystem::path& root() const override { return root_; }

  // Writes to kernel paths matching `pattern` (std::regex, whole path) go to model. The first
  // registered match wins.
  void model(const std::string& pattern, Model model);

  // The nth (1-based) write from now whose kernel path matches pattern fails with err, changing
  // nothing. Each injected fault fires once.
  void fail_write(const std::string& pattern, int err, int nth = 1);

  // Writes to kernel paths matching `pattern` return `duration` after their model ran, outside the
  // lock: as a function reset holds its writer, not the bus (pcie_flr sleeps 100 ms after starting
  // an FLR, PCIe r4.0 sec 6.6.2; drivers/pci/pci.c), so resets of two devices wait side by side.
  // For benches, which time what the kernel's waits add; no test sets one.
  void delay(const std::string& pattern, std::chrono::milliseconds duration);

  // For a model, while it handles a write: runs `wait` with the kernel's lock released, so that
  // other threads' writes go on meanwhile, as they do on a kernel where one write blocks.
  template <typename Wait>
  void unlocked(Wait&& wait) {
    std::unique_lock<std::mutex>* const mine = held_;
    mine->unlock();
    wait();
    mine->lock();
    held_ = mine;
  }

  // Every write that reached a model or the plain store, in order: {kernel path, value}.
  const std::vector<std::pair<std::string, std::string>>& writes() const { return writes_; }
  int faults_fired() const { return faults_fired_; }

  // Helpers for models: the file on disk for a kernel path, and the usual filesystem changes.
  std::filesystem::path host_path(const std::string& kernel_path) const;
  void store(const std::string& kernel_path, std::string_view value) const;
  Error refuse(int err, const std::string& kernel_path, std::string_view value) const;

 private:
  struct Entry {
    std::regex pattern;
    Model model;
  };
  struct Fault {
    std::regex pattern;
    int err = 0;
    int remaining = 1;  // matching writes still to let through, plus this one
  };

  struct Delay {
    std::regex pattern;
    std::chrono::milliseconds duration;
  };
  Status write_locked(const std::string& kernel_path, std::string_view value);

  std::filesystem::path root_;
  std::mutex mutex_;
  std::unique_lock<std::mutex>* held_ = nullptr;  // the lock of the write being handled
  std::vector<Delay> delays_;
  std::vector<Entry> models_;
  std::vector<Fault> faults_;
  std::vector<std::pair<std::string, std::string>> writes_;
  int faults_fired_ = 0;
};

// Everything under root, as "relative path" -> "dir", "file:<contents>" or "link:<target>": two
// snapshots compare equal exactly when a rollback left the tree as it found it.
std::map<std::string, std::string> snapshot_tree(const std::filesystem::path& root);

// The entries on which two snapshots differ, one per line ("- path: before" / "+ path: after"), for
// a failure message that says what was left behind.
std::string describe_difference(const std::map<std::string, std::string>& before,
                                const std::map<std::string, std::string>& after);

}  // namespace hostagent::testing
