// discovery/config_space_reader: PCI config space through libpci (never setpci): the PCI Express port
// type, link capability and status, the largest read request, and the ACS and ATS extended
// capabilities of one function.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "hostagent/common/result.hpp"
#include "hostagent/discovery/libpci_session.hpp"
#include "hostagent/numa/host_model.hpp"

namespace hostagent::discovery::detail {

struct ConfigSpaceInfo {
  bool readable = false;  // false: config file missing or shorter than the 64-byte header
  bool has_pcie_capability = false;
  std::optional<numa::PciePortType> port_type;
  numa::PcieLink link;
  std::optional<int> max_read_request_bytes;
  std::optional<numa::AcsState> acs;
  std::optional<numa::AtsState> ats;
};

class ConfigSpaceReader {
 public:
  // sysfs_bus_pci: the directory libpci's sysfs method reads ("<root>/sys/bus/pci").
  static Result<ConfigSpaceReader> open(const std::filesystem::path& sysfs_bus_pci);
  ConfigSpaceInfo read(const PciAddress& address) const;

 private:
  explicit ConfigSpaceReader(LibpciSession session) : session_(std::move(session)) {}
  LibpciSession session_;
};

double pcie_speed_gts(int speed_code);  // Link Capabilities/Status speed encoding, 0 if unknown

}  // namespace hostagent::discovery::detail
