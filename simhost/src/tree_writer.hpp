// simhost/tree_writer: creates files, directories and relative symlinks under a root, addressed by
// kernel paths ("/sys/bus/pci/devices/..."). The first failure sticks: later calls do nothing and
// status() reports it, so the writers read as a list of what the kernel shows rather than as error
// plumbing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::simhost::detail {

class TreeWriter {
 public:
  explicit TreeWriter(std::filesystem::path root) : root_(std::move(root)) {}
  // A writer that writes nothing and keeps each call instead, for digest(): the tree's
  // fingerprint, which changes whenever what the writers would write changes.
  static TreeWriter digesting();

  void dir(const std::string& kernel_path);
  // Writes contents as is (the caller adds the newline the kernel ends an attribute with).
  void file(const std::string& kernel_path, const std::string& contents);
  void binary(const std::string& kernel_path, const std::vector<uint8_t>& contents);
  // kernel_path -> target, written relative to kernel_path's directory so the link resolves inside
  // the root, as sysfs links resolve inside /sys.
  void link(const std::string& kernel_path, const std::string& target_kernel_path);

  Status status() const;
  // The SHA-256 of the calls so far (common/sha256), 64 hex digits; "" for a writer that writes.
  std::string digest() const;

 private:
  std::filesystem::path host(const std::string& kernel_path) const;
  bool make_parent(const std::filesystem::path& path);
  void fail(int err, const std::string& operation, const std::filesystem::path& path);

  void keep(char kind, const std::string& kernel_path, const uint8_t* data, std::size_t size);

  std::filesystem::path root_;
  bool digesting_ = false;
  std::string calls_;  // what a digesting writer was asked to write (about 2 MB for vela2)
  bool failed_ = false;
  Error error_{ErrorCode::internal, ""};
};

}  // namespace hostagent::simhost::detail
