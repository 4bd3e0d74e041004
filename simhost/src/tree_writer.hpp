// simhost/tree_writer: creates files, directories and relative symlinks under a root, addressed by
// kernel paths ("/sys/bus/pci/devices/..."). The first failure sticks: later calls do nothing and
// status() reports it, so the writers read as a list of what the kernel shows rather than as error
// plumbing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::simhost::detail {

class TreeWriter {
 public:
  explicit TreeWriter(std::filesystem::path root) : root_(std::move(root)) {}

  void dir(const std::string& kernel_path);
  // Writes contents as is (the caller adds the newline the kernel ends an attribute with).
  void file(const std::string& kernel_path, const std::string& contents);
  void binary(const std::string& kernel_path, const std::vector<uint8_t>& contents);
  // kernel_path -> target, written relative to kernel_path's directory so the link resolves inside
  // the root, as sysfs links resolve inside /sys.
  void link(const std::string& kernel_path, const std::string& target_kernel_path);

  Status status() const;

 private:
  std::filesystem::path host(const std::string& kernel_path) const;
  bool make_parent(const std::filesystem::path& path);
  void fail(int err, const std::string& operation, const std::filesystem::path& path);

  std::filesystem::path root_;
  bool failed_ = false;
  Error error_{ErrorCode::internal, ""};
};

}  // namespace hostagent::simhost::detail
