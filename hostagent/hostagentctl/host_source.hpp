// Where hostagentctl reads a host from: a sysfs root (the live host by default), an hwloc XML
// capture, or one of the built-in simulated hosts written to a scratch directory.
#pragma once

#include <optional>
#include <string>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"

namespace hostagent::ctl {

struct HostSource {
  std::optional<std::string> sysfs_root;
  std::optional<std::string> hwloc_xml;
  std::optional<std::string> simulated;
};

Result<numa::HostModel> load_host(const HostSource& source);

}  // namespace hostagent::ctl
