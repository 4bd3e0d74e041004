// daemon/host_watch: the devices' health, the free hugepages and the host now (see host_watch.hpp).
#include "host_watch.hpp"

#include <algorithm>

#include "daemon_log.hpp"

namespace hostagent::daemon {

void HostWatch::start() {
  if (!readers_.device_health) return;
  poller_ = std::make_unique<HealthPoller>([this] { return read(); }, interval_, clock_);
}

// On the poller's thread. The free hugepages are read with the health, so that capacity (and a
// scrape) reads memory; a placement reads them again itself, under the ledger's lock.
Result<std::vector<numa::DeviceHealth>> HostWatch::read() {
  auto reading = readers_.device_health(host_);
  if (reading.ok()) lifecycle_.note_health(*reading);
  if (!readers_.free_hugepages) return reading;
  auto free = readers_.free_hugepages(host_);
  if (!free.ok()) log(LogLevel::warning, "capacity: free hugepages unreadable: " + free.error().message);
  const std::lock_guard lock(mutex_);
  free_pages_ = free.ok() ? std::optional(std::move(free).value()) : std::nullopt;
  return reading;
}

Result<service::DeviceHealthReading> HostWatch::device_health() const {
  if (!poller_) return Error{ErrorCode::unsupported, "device health: this host model was not read from sysfs"};
  return poller_->latest();
}

std::optional<HostReaders::FreePages> HostWatch::free_pages() const {
  const std::lock_guard lock(mutex_);
  return free_pages_;
}

numa::HostModel HostWatch::host_now() {
  const std::lock_guard lock(host_now_mutex_);
  const auto now = clock_.steady_now();
  if (!host_now_ || now - host_now_at_ >= std::chrono::seconds(1)) {
    host_now_ = read_host_now();
    host_now_at_ = now;
  }
  return *host_now_;
}

numa::HostModel HostWatch::read_host_now() const {
  numa::HostModel host = host_;
  if (!readers_.p2p_state) return host;
  const auto states = readers_.p2p_state(host);
  if (!states.ok()) {
    log(LogLevel::warning, "host: ACS/ATS as discovered, config space unreadable: " + states.error().message);
    return host;
  }
  for (const auto& state : *states) {
    const auto f = std::find_if(host.pci_devices.begin(), host.pci_devices.end(),
                                [&](const numa::PciFunction& p) { return p.address == state.device; });
    if (f == host.pci_devices.end()) continue;
    if (f->acs && state.acs_control) f->acs->control = *state.acs_control;
    if (f->ats && state.ats_enabled) f->ats->enabled = *state.ats_enabled;
  }
  return host;
}

}  // namespace hostagent::daemon
