// simhost/sysfs_writer: write_sysfs_tree, the entry point. It checks the whole spec before it
// writes anything, so a bad spec leaves no half-written tree behind, then hands the parts to
// system_writer.cpp, pci_writer.cpp, net_writer.cpp and host_use_writer.cpp.
#include <set>
#include <system_error>

#include "hostagent/common/text_file.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "writers.hpp"

namespace hostagent::simhost {
namespace {
namespace fs = std::filesystem;

Error invalid_node(const SimNumaNode& node, const std::string& what) {
  return Error{ErrorCode::invalid_argument, "simhost: node " + std::to_string(node.id) + ": " + what};
}

Status check_nodes(const HostSpec& spec) {
  if (spec.nodes.empty()) {
    return Error{ErrorCode::invalid_argument, "simhost: host " + spec.name + " has no NUMA node"};
  }
  std::set<int> ids;
  int cpus = 0;
  for (const auto& node : spec.nodes) {
    if (node.id < 0 || !ids.insert(node.id).second) {
      return invalid_node(node, "id is negative or used twice");
    }
    if (node.cores < 0 || node.threads_per_core < 1) {
      return invalid_node(node, "needs cores >= 0 and threads_per_core >= 1");
    }
    if (!node.distances.empty() && node.distances.size() != spec.nodes.size()) {
      return invalid_node(node, "has " + std::to_string(node.distances.size()) + " distances for " +
                                    std::to_string(spec.nodes.size()) + " nodes");
    }
    if (node.memory_free_bytes > node.memory_bytes) {
      return invalid_node(node, "has more free memory than memory");
    }
    cpus += node.cores * node.threads_per_core;
  }
  if (cpus == 0) {
    return Error{ErrorCode::invalid_argument, "simhost: host " + spec.name + " has no CPU"};
  }
  return ok_status();
}

// The root must be new or empty: writing over an old tree would mix two hosts.
Status prepare_root(const fs::path& root) {
  std::error_code ec;
  if (fs::exists(root, ec)) {
    if (!fs::is_directory(root, ec)) {
      return Error{ErrorCode::invalid_argument, "simhost: root " + root.string() + " is not a directory"};
    }
    if (!fs::is_empty(root, ec)) {
      return Error{ErrorCode::invalid_argument, "simhost: root " + root.string() + " is not empty"};
    }
    return ok_status();
  }
  fs::create_directories(root, ec);
  if (ec) return errno_error(ec.value(), "mkdir", root.string());
  return ok_status();
}

Result<detail::PciPlan> checked_plan(const HostSpec& spec) {
  HA_TRY_STATUS(check_nodes(spec));
  HA_TRY(auto plan, detail::plan_pci(spec));
  HA_TRY_STATUS(detail::check_host_use(spec, plan));
  return plan;
}

void write_parts(detail::TreeWriter& writer, const HostSpec& spec, const detail::PciPlan& plan) {
  const auto cpus = detail::layout_cpus(spec);
  detail::write_system(writer, spec, cpus);
  detail::write_pci(writer, spec, plan, cpus);
  detail::write_network(writer, plan);
  detail::write_host_use(writer, spec, plan);
}

// ensure_sysfs_tree's record of the tree under a root: the host's name and the tree's digest. A
// file beside sys/ and proc/, which discovery never reads.
constexpr const char* kStampName = ".simhost-tree";

}  // namespace

Status write_sysfs_tree(const HostSpec& spec, const std::filesystem::path& root) {
  HA_TRY(const auto plan, checked_plan(spec));
  HA_TRY_STATUS(prepare_root(root));
  detail::TreeWriter writer(root);
  write_parts(writer, spec, plan);
  return writer.status();
}

Result<std::string> tree_digest(const HostSpec& spec) {
  HA_TRY(const auto plan, checked_plan(spec));
  auto writer = detail::TreeWriter::digesting();
  write_parts(writer, spec, plan);
  return writer.digest();
}

Result<bool> ensure_sysfs_tree(const HostSpec& spec, const std::filesystem::path& root) {
  HA_TRY(const auto digest, tree_digest(spec));
  const std::string stamp = spec.name + " " + digest + "\n";
  const fs::path stamp_path = root / kStampName;
  if (const auto was = read_text_file(stamp_path); was.ok() && *was == stamp) return false;
  std::error_code ec;
  fs::remove_all(root, ec);
  if (ec) return errno_error(ec.value(), "remove", root.string());
  HA_TRY_STATUS(write_sysfs_tree(spec, root));
  // Last: a tree cut short (the daemon killed while writing it) has no stamp, so the next start
  // writes it again.
  HA_TRY_STATUS(write_text_file(stamp_path, stamp));
  return true;
}

}  // namespace hostagent::simhost
