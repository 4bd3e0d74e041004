// devices/binder_options: how the binder is told which drivers it may take a device from, for
// both the host's preparation at start and a VM's, and what the host uses: one rule.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/discovery/host_use_reader.hpp"
#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::devices::detail {

// What the host uses (discovery's detect_host_use, with the operator's reservations), read at the
// first group a preparation binds and kept for the rest of it: a model read at start does not know
// the disk mounted since, and one reading per preparation (mountinfo, swaps, holders, routes, a
// netlink dump) is enough, where a full-host VM binds some thirty groups. forget() begins the next.
class HostUseReading {
 public:
  HostUseReading(std::filesystem::path root, std::vector<numa::HostUse> reserved)
      : root_(std::move(root)), reserved_(std::move(reserved)) {}

  Result<std::vector<numa::HostUse>> current() {
    std::lock_guard lock(mutex_);
    if (!reading_) reading_ = read();
    return *reading_;
  }
  void forget() {
    std::lock_guard lock(mutex_);
    reading_.reset();
  }
  // Read now, kept for nobody: the cleaning's check before each step.
  Result<std::vector<numa::HostUse>> read() const {
    HA_TRY(auto uses, discovery::detect_host_use(root_));
    uses.insert(uses.end(), reserved_.begin(), reserved_.end());
    return uses;
  }

 private:
  const std::filesystem::path root_;
  const std::vector<numa::HostUse> reserved_;
  std::mutex mutex_;
  std::optional<Result<std::vector<numa::HostUse>>> reading_;  // an error is kept too: it binds nothing
};

inline vfio::BinderOptions binder_options(const PreparationOptions& options,
                                          const std::shared_ptr<HostUseReading>& reading) {
  vfio::BinderOptions binder;
  if (!options.releasable_drivers.empty()) binder.unbindable_drivers = options.releasable_drivers;
  binder.host_use = [reading]() { return reading->current(); };
  return binder;
}

}  // namespace hostagent::devices::detail
