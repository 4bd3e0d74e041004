// common/sysfs_root: read-only access to a kernel tree (sysfs, procfs) under a root directory.
// Every module that reads the kernel takes one of these, so tests point it at a fixture tree and the
// daemon at "/". Paths given to it are absolute kernel paths ("/sys/bus/pci/devices"); errors name
// the full path on disk, because that is what an operator can go and look at.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent {

class SysfsRoot {
 public:
  // Fails when root is not a directory: a missing root is the operator's typo, not an empty host.
  static Result<SysfsRoot> open(const std::filesystem::path& root);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path host_path(const std::string& kernel_path) const;

  bool exists(const std::string& kernel_path) const;
  // The file's contents with the trailing newline the kernel appends removed.
  Result<std::string> read(const std::string& kernel_path) const;
  Result<std::string> read_binary(const std::string& kernel_path) const;
  // Decimal integer attributes (numa_node, sriov_numvfs). Anything else is a parse_error naming the path.
  Result<int64_t> read_int(const std::string& kernel_path) const;
  // Hexadecimal attributes with 0x prefix (vendor, device, class).
  Result<uint64_t> read_hex(const std::string& kernel_path) const;
  // Like read_int/read_hex, but a missing file is "unknown" rather than an error.
  Result<std::optional<int64_t>> read_optional_int(const std::string& kernel_path) const;
  // The last component of a symlink's target: driver -> ../../bus/pci/drivers/nvidia gives "nvidia".
  Result<std::optional<std::string>> read_link_name(const std::string& kernel_path) const;
  // A link to a numbered entry (iommu_group -> ../../../kernel/iommu_groups/12 gives 12); a name
  // that is not wholly a decimal number is a parse_error naming the link.
  Result<std::optional<int>> read_link_number(const std::string& kernel_path) const;
  // Sorted entry names; a missing directory is an empty list only when missing_ok.
  Result<std::vector<std::string>> list(const std::string& kernel_path, bool missing_ok) const;

 private:
  explicit SysfsRoot(std::filesystem::path root) : root_(std::move(root)) {}
  std::filesystem::path root_;
};

// "0-3,8,10-11" (cpulist format, Documentation/admin-guide/cputopology.rst) to ids, sorted and
// unique. parse_error: "cpu list "X": WHY".
Result<std::vector<int>> parse_cpu_list(const std::string& text);
// The same parse for a caller that says where the text was: the ids, or why it is not a CPU list
// ("bad range "3-1""), bare.
struct CpuListRead {
  std::optional<std::vector<int>> cpus;
  std::string why;  // "" when cpus
};
CpuListRead read_cpu_list(const std::string& text);
// The inverse, compressing runs: {0,1,2,3,8} -> "0-3,8".
std::string format_cpu_list(const std::vector<int>& ids);

}  // namespace hostagent
