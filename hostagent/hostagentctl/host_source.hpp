// Where hostagentctl reads a host from: a sysfs root (the live host by default), an hwloc XML
// capture, or one of the built-in simulated hosts written to a scratch directory.
#pragma once

#include <filesystem>
#include <memory>
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

// The host with the root its procfs and sysfs lie under ("/", the --sysfs-root, or a simulated
// host's scratch tree, which lives as long as `keep`). An hwloc capture has none: invalid_argument.
struct HostRoot {
  numa::HostModel model;
  std::filesystem::path root;
  std::shared_ptr<void> keep;
};
Result<HostRoot> load_host_root(const HostSource& source);

}  // namespace hostagent::ctl
