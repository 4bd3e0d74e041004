// hostagent/devices/device_records: what device preparation did, on disk, one file per owner (a VM,
// or the host's own preparation at start), so that a release after a restart or a crash puts back
// exactly what was there: the driver each function came from, the VF settings applied, the ACS and
// ATS registers a VM needs. Written ahead: a record names a change before the change is made, and
// every undo (vfio release, VF reset, register restore) is idempotent, so undoing a change that
// never happened is harmless, while a change made and not recorded could never be undone.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/sriov/vf_configurator.hpp"
#include "hostagent/vfio/p2p_settings.hpp"
#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::devices {

// The version of a device record's layout, written in its "format" (json_fields::format_version).
inline constexpr int kDeviceRecordFormat = 1;

struct DeviceRecord {
  std::string owner;                       // a VM's name; kHostDeviceOwner for the host's preparation
  std::vector<vfio::GroupBinding> groups;  // bound to vfio-pci by this owner, in bind order
  std::vector<sriov::VfConfigRecord> vfs;  // configured over netlink, in order
  std::vector<vfio::RegisterChange> p2p;   // registers this owner needs (before: the host's value)
  bool operator==(const DeviceRecord&) const = default;
};

// The host's own record: GPUs and NVSwitches bound at start, and kept bound across VMs. No VM can
// have this name: VM names never start with '@'.
inline constexpr const char* kHostDeviceOwner = "@host";

class DeviceRecords {
 public:
  // Creates the directory (mode 0700) when missing.
  static Result<DeviceRecords> open(const std::filesystem::path& directory);

  // Replaces the owner's record atomically and durably (write, fsync, rename, fsync directory).
  Status write(const DeviceRecord& record);
  // Durably; a missing record is fine.
  Status remove(const std::string& owner);
  // nullopt when the owner has no record.
  Result<std::optional<DeviceRecord>> read(const std::string& owner) const;
  // Every record, by owner. A file that cannot be parsed is an error naming it: a release must not
  // guess which driver a device came from.
  Result<std::vector<DeviceRecord>> all() const;

  const std::filesystem::path& directory() const { return directory_; }

 private:
  explicit DeviceRecords(std::filesystem::path directory) : directory_(std::move(directory)) {}
  std::filesystem::path directory_;
};

// The record as JSON and back; from_json checks every field (addresses, driver and netdev names)
// before any of it can reach a sysfs path or a netlink request.
std::string device_record_to_json(const DeviceRecord& record);
Result<DeviceRecord> device_record_from_json(const std::string& text, const std::string& source);

}  // namespace hostagent::devices
