// daemon/console_sessions (private): who holds each VM's serial console through hostagent. One
// interactive session per VM: a second is refused, naming the first's principal and start, unless
// it takes the console over. Each session buffers the guest's output for its client, bounded, so
// the guest never waits on a client. In memory only: a session does not outlive the daemon (its
// WebSocket goes with it). Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "hostagent/common/names.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/virt/hypervisor.hpp"

namespace hostagent::daemon {

class ConsoleSessions {
 public:
  ConsoleSessions(virt::Hypervisor& hypervisor, Clock& clock);

  // The caller has checked that hostagent made the VM.
  Result<std::shared_ptr<service::ConsoleSession>> open(const VmName& name, bool take_over,
                                                        const std::string& principal);

  // What the registry keeps of one VM's console; public for the session, which tells it when it
  // ends and when libvirt has let go of its stream.
  struct Entry;
  struct Registry;

 private:
  virt::Hypervisor& hypervisor_;
  Clock& clock_;
  std::shared_ptr<Registry> registry_;  // shared with the sessions, which may outlive this owner
};

}  // namespace hostagent::daemon
