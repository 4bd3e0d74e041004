#include "host_source.hpp"

#include <cstdlib>
#include <filesystem>

#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"

namespace hostagent::ctl {
namespace {

class ScratchDir {
 public:
  static Result<ScratchDir> create() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base != nullptr ? base : "/tmp") + "/hostagent-sim-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) return errno_error(errno, "mkdtemp", templ);
    return ScratchDir(templ);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit ScratchDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

Result<HostRoot> load_simulated(const std::string& name) {
  HA_TRY(const auto spec, simhost::builtin_host(name));
  HA_TRY(auto dir, ScratchDir::create());
  HA_TRY_STATUS(simhost::write_sysfs_tree(spec, dir.path()));
  HA_TRY(auto model, discovery::discover_from_sysfs(dir.path()));
  model.source = "simulated:" + name;  // the scratch path goes with the HostRoot
  const auto root = dir.path();
  return HostRoot{std::move(model), root, std::make_shared<ScratchDir>(std::move(dir))};
}

}  // namespace

Result<numa::HostModel> load_host(const HostSource& source) {
  if (source.hwloc_xml) return discovery::discover_from_hwloc_xml(*source.hwloc_xml);
  HA_TRY(auto host, load_host_root(source));
  return std::move(host.model);
}

Result<HostRoot> load_host_root(const HostSource& source) {
  if (source.hwloc_xml) {
    return Error{ErrorCode::invalid_argument,
                 "--hwloc-xml: an hwloc capture holds no kernel state (procfs, IOMMU, drivers); use --sysfs-root or "
                 "--simulated"};
  }
  if (source.simulated) return load_simulated(*source.simulated);
  const std::filesystem::path root = source.sysfs_root.value_or("/");
  HA_TRY(auto model, discovery::discover_from_sysfs(root));
  return HostRoot{std::move(model), root, nullptr};
}

}  // namespace hostagent::ctl
