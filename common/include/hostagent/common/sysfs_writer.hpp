// common/sysfs_writer: the one way hostagent changes the kernel's view of a device: writes to sysfs
// attributes (bind, unbind, driver_override, drivers_probe, sriov_numvfs, reset) under a root. An
// interface, as Envoy's OsSysCalls is, so tests substitute a fake kernel that models what each write
// does (tests/support/fake_kernel.hpp) and the daemon uses the real file under "/".
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent {

class SysfsWriter {
 public:
  virtual ~SysfsWriter() = default;
  // Writes value to the attribute at kernel_path ("/sys/bus/pci/drivers_probe") in one write(2):
  // sysfs hands a store() handler one buffer per write, so a value split over two writes is two
  // requests. The attribute must exist: sysfs never creates a file on open, and neither does this.
  // The kernel's refusal comes back as the Error (EBUSY: conflict; ENOENT, ENODEV: not_found).
  virtual Status write(const std::string& kernel_path, std::string_view value) = 0;
  virtual const std::filesystem::path& root() const = 0;
};

// Writes the files under root ("/" on a host).
std::unique_ptr<SysfsWriter> make_sysfs_writer(std::filesystem::path root);

// The Error a refused write gives: errno translated, the operation and the full path named.
Error sysfs_write_error(int err, const std::filesystem::path& file, std::string_view value);

}  // namespace hostagent
