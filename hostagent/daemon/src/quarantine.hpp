// daemon/quarantine (private): the devices kept out of placement until an operator clears them, the
// one owner of that state. A device is quarantined when the kernel would not bind it to vfio-pci
// (the preparer's fault report) or when it is gone from the bus (the health poller's reading): a
// create after that must not be handed the same broken GPU. Each change is written to disk first
// (state/quarantine_record), then told to the ledger, which placement reads, then logged and
// published: a crash between the two errs on keeping the device out.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "event_hub.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/numa/device_health.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/quarantine_record.hpp"
#include "ledger.hpp"

namespace hostagent::daemon {

class Quarantine {
 public:
  Quarantine(std::filesystem::path file, Ledger& ledger, EventHub& events, Clock& clock)
      : file_(std::move(file)), ledger_(ledger), events_(events), clock_(clock) {}

  // Reads what earlier runs quarantined and tells the ledger; an unreadable file stops the start.
  Status load();
  // Quarantines a device, unless it already is: the first failure's account is the one kept. A
  // file that cannot be written is logged, and the device is kept out for this run all the same.
  void add(const PciAddress& address, const std::string& step, const std::string& reason, const std::string& vm);
  // Each device of `health` that is gone from the bus, of a role a VM takes (GPU, NVSwitch, NIC,
  // NVMe), with the VM holding it named where one does.
  void note_health(const std::vector<numa::DeviceHealth>& health);
  // not_found when the device is not quarantined; a file that cannot be written changes nothing.
  Result<QuarantineView> clear(const PciAddress& address, const std::string& principal);
  std::vector<QuarantineView> list() const;

 private:
  void tell_ledger_locked();
  void publish(const PciAddress& address, const std::optional<QuarantineView>& entry);

  const std::filesystem::path file_;
  Ledger& ledger_;
  EventHub& events_;
  Clock& clock_;
  mutable std::mutex mutex_;  // taken before the ledger's, never after
  std::vector<state::QuarantinedDevice> devices_;
};

}  // namespace hostagent::daemon
