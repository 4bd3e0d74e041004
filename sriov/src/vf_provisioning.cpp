// sriov/vf_provisioning: sriov_numvfs writes with the kernel's rules (drivers/pci/iov.c), the
// vfio-pci guard, and the restore of the previous count when a step fails.
#include "hostagent/sriov/vf_provisioning.hpp"

namespace hostagent::sriov {
namespace {

std::string pf_dir(const numa::PciAddress& pf) {
  return kPciDevicesDir + pf.to_string();
}

std::string numvfs_path(const numa::PciAddress& pf) {
  return pf_dir(pf) + "/sriov_numvfs";
}

Status write_numvfs(SysfsWriter& writer, const numa::PciAddress& pf, int count) {
  return writer.write(numvfs_path(pf), std::to_string(count) + "\n");
}

std::string list_addresses(const std::vector<LiveVf>& vfs) {
  std::string out;
  for (const auto& vf : vfs) {
    out += (out.empty() ? "" : ", ") + vf.address.to_string() + " (virtfn" + std::to_string(vf.index) + ")";
  }
  return out;
}

// The PF's SR-IOV capability and the count it may take.
Result<int> total_vfs(const SysfsRoot& sysfs, const numa::PciAddress& pf) {
  if (!sysfs.exists(pf_dir(pf))) {
    return Error{ErrorCode::not_found,
                 "PCI device " + pf.to_string() + " not found at " + sysfs.host_path(pf_dir(pf)).string()};
  }
  HA_TRY(const auto total, sysfs.read_optional_int(pf_dir(pf) + "/sriov_totalvfs"));
  if (!total) {
    return Error{ErrorCode::invalid_argument,
                 pf.to_string() + " is not an SR-IOV physical function (no sriov_totalvfs): name its PF instead"};
  }
  return static_cast<int>(*total);
}

// Removing VFs unbinds them; one that vfio-pci holds belongs to a VM.
Status check_none_given_to_vms(const SysfsRoot& sysfs, const numa::PciAddress& pf, int current, int count) {
  HA_TRY(const auto vfs, live_vfs(sysfs, pf));
  std::vector<LiveVf> held;
  for (const auto& vf : vfs) {
    if (vf.driver == "vfio-pci") held.push_back(vf);
  }
  if (held.empty()) return ok_status();
  return Error{ErrorCode::conflict, "cannot change " + pf.to_string() + " from " + std::to_string(current) + " to " +
                                        std::to_string(count) + " VFs: the kernel removes every VF on the way, and " +
                                        list_addresses(held) + " bound to vfio-pci (given to a VM); release " +
                                        (held.size() == 1 ? "it" : "them") + " first"};
}

// The kernel creates the VFs inside the write, so they are there when it returns, unless the PF
// driver enabled fewer than asked (sriov_numvfs_store only warns "only %d enabled").
Status check_created(const SysfsRoot& sysfs, const numa::PciAddress& pf, int count) {
  const std::string what =
      "after writing " + std::to_string(count) + " to " + sysfs.host_path(numvfs_path(pf)).string();
  HA_TRY(const auto now, sysfs.read_int(numvfs_path(pf)));
  if (now != count) {
    return Error{ErrorCode::io_error, what + ": the PF reports " + std::to_string(now) +
                                          " VFs (its driver enabled fewer; see the kernel log)"};
  }
  for (int n = 0; n < count; ++n) {
    const std::string link = pf_dir(pf) + "/virtfn" + std::to_string(n);
    HA_TRY(const auto vf, sysfs.read_link_name(link));
    if (!vf || !sysfs.exists(kPciDevicesDir + *vf)) {
      return Error{ErrorCode::io_error, what + ": " + sysfs.host_path(link).string() + " is missing"};
    }
  }
  return ok_status();
}

// After a failure with sriov_numvfs at 0: back to the count there was, and say how that went.
Error restore(SysfsWriter& writer, const numa::PciAddress& pf, int previous, Error failure) {
  if (previous == 0) return failure;
  const auto back = write_numvfs(writer, pf, previous);
  failure.message +=
      back.ok() ? "; restored the previous " + std::to_string(previous) + " VFs"
                : "; restoring the previous " + std::to_string(previous) + " VFs failed too: " + back.error().message;
  return failure;
}

}  // namespace

Result<std::vector<LiveVf>> live_vfs(const SysfsRoot& sysfs, const numa::PciAddress& pf) {
  if (!sysfs.exists(pf_dir(pf))) {
    return Error{ErrorCode::not_found,
                 "PCI device " + pf.to_string() + " not found at " + sysfs.host_path(pf_dir(pf)).string()};
  }
  std::vector<LiveVf> out;
  // virtfnN are numbered densely from 0 (pci_iov_add_virtfn); the first gap is the end.
  for (int n = 0;; ++n) {
    HA_TRY(const auto name, sysfs.read_link_name(pf_dir(pf) + "/virtfn" + std::to_string(n)));
    if (!name) break;
    HA_TRY(const auto address, numa::PciAddress::parse(*name));
    HA_TRY(const auto driver, sysfs.read_link_name(kPciDevicesDir + *name + "/driver"));
    out.push_back(LiveVf{n, address, driver});
  }
  return out;
}

Status set_vf_count(const SysfsRoot& sysfs, SysfsWriter& writer, const numa::PciAddress& pf, int count) {
  HA_TRY(const int total, total_vfs(sysfs, pf));
  if (count < 0 || count > total) {
    return Error{ErrorCode::invalid_argument, "VF count " + std::to_string(count) + " for " + pf.to_string() +
                                                  " is out of range: its sriov_totalvfs is " + std::to_string(total)};
  }
  HA_TRY(const auto current_value, sysfs.read_int(numvfs_path(pf)));
  const int current = static_cast<int>(current_value);
  if (current == count) return ok_status();
  HA_TRY(const auto pf_driver, sysfs.read_link_name(pf_dir(pf) + "/driver"));
  if (!pf_driver) {
    // sriov_numvfs_store asks the PF driver's sriov_configure; without a driver it answers ENOENT.
    return Error{ErrorCode::conflict, pf.to_string() +
                                          " has no driver bound; VFs are created by the PF's driver: "
                                          "bind it (e.g. mlx5_core) before setting its VF count"};
  }
  const std::string step = "set " + std::to_string(count) + " VFs on " + pf.to_string() + ": ";
  if (current > 0) {
    HA_TRY_STATUS(check_none_given_to_vms(sysfs, pf, current, count));
    if (auto off = write_numvfs(writer, pf, 0); !off.ok()) {
      return Error{off.error().code,
                   step + "removing the current " + std::to_string(current) + " failed: " + off.error().message};
    }
  }
  if (count == 0) return ok_status();
  if (auto on = write_numvfs(writer, pf, count); !on.ok()) {
    return restore(writer, pf, current, Error{on.error().code, step + on.error().message});
  }
  if (auto created = check_created(sysfs, pf, count); !created.ok()) {
    // Leave nothing half made: the short set goes too, then the previous count comes back.
    const auto off = write_numvfs(writer, pf, 0);
    Error failure{created.error().code, step + created.error().message};
    if (!off.ok()) {
      failure.message += "; removing them failed too: " + off.error().message;
      return failure;
    }
    return restore(writer, pf, current, std::move(failure));
  }
  return ok_status();
}

}  // namespace hostagent::sriov
