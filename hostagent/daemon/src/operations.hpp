// daemon/operations (private): the VM operations, each run on its VM's queue.
#pragma once

#include <chrono>
#include <string>

#include "vm_work.hpp"

namespace hostagent::daemon {

// What a create's request must satisfy before it is queued, beyond the names and MACs it arrives
// with checked: paths, one of keys or user data, a template the daemon has.
Status check_create_request(const Facts& facts, const service::CreateVmRequest& request);
Result<service::VmView> create_vm(VmWork& work, const service::CreateVmRequest& request);
Status delete_vm(Effects& effects, Recording& recording, const std::string& name);
Result<service::VmView> start_vm(VmWork& work, const std::string& name);
Result<service::VmView> stop_vm(VmWork& work, const std::string& name, bool force);
// A drain's stop: asked to shut down, powered off at `deadline`. True when it was powered off.
Result<bool> drain_vm(VmWork& work, const std::string& name, std::chrono::steady_clock::time_point deadline);
Result<service::VmView> reboot_vm(VmWork& work, const std::string& name);

// The VM as the ledger knows it; not_found for an unknown name.
Result<service::VmView> current_view(VmWork& work, const std::string& name);

}  // namespace hostagent::daemon
