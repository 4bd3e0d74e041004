// hostagent/devices/device_cleaning: what cleaning a device between tenants does, step by step, for
// its role (issue 19): the steps a preparer hands the daemon, which runs them in order, times them,
// keeps their evidence and stops at the first that fails. Each step checks its own work: a reset is
// proved by config space answering as the device again, a ROM by its hash against the operator's
// known-good list, a VF by reading its settings back. A step that cannot run here says why
// (skipped), so the evidence never claims what was not done.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/host_use.hpp"
#include "hostagent/nvme/nvme_erase.hpp"
#include "hostagent/sriov/vf_netlink.hpp"
#include "hostagent/vfio/function_reset.hpp"

namespace hostagent::devices {

enum class StepResult { passed, failed, skipped };
const char* to_string(StepResult result) noexcept;

struct StepOutcome {
  StepResult result = StepResult::failed;
  std::string detail;  // what was seen: a method, a hash, why it was skipped or failed
};

struct CleaningStep {
  std::string name;  // reset | firmware | erase | scrub | vf-neutral
  std::function<StepOutcome()> run;
  // Whether it runs under the preparer's lock (it shares the sysfs writer, config space or
  // netlink with preparations). The scrubber and the erase do not: they may run for minutes; nor
  // does the reset, which the kernel may hold as long as a wedged host driver does.
  bool exclusive = true;
};

// What the operator asked of cleaning (the daemon's `hygiene:` configuration, translated where the
// daemon is assembled).
struct HygieneOptions {
  // Known-good expansion ROM images by {vendor, device}: SHA-256 in lower-case hex. A device with a
  // list whose ROM hashes to none of it is quarantined; one without a list has its hash recorded.
  std::map<std::pair<uint16_t, uint16_t>, std::vector<std::string>> firmware;
  vfio::ResetPolling reset_polling;
  // The GPU memory scrubber: argv, each "{address}" in it replaced by the GPU's PCI address; run
  // while the GPU is on vfio-pci, its exit status deciding. Empty: none (the evidence says so).
  std::vector<std::string> gpu_scrub;
  std::chrono::milliseconds gpu_scrub_timeout{std::chrono::minutes(10)};
  // How an NVMe controller is erased: the bound on a sanitize or format, the blocks read back.
  nvme::EraseOptions nvme_erase;
};

// The steps for `function` on a host whose devices hostagent prepares itself. Reset for every role
// (a function the kernel cannot reset is not shown clean: the step fails); the ROM checked where the
// function has one; a VF's settings read back as neutral; a GPU's memory scrubbed by the operator's
// scrubber, or marked not scrubbed; an NVMe controller erased and read back (nvme/nvme_erase), and
// a VF shown to hold no namespace.
struct CleaningParts {
  const numa::HostModel* host = nullptr;
  const SysfsRoot* sysfs = nullptr;
  SysfsWriter* writer = nullptr;
  vfio::ConfigSpace* config_space = nullptr;
  sriov::VfNetlink* netlink = nullptr;
  const HygieneOptions* hygiene = nullptr;
  nvme::ControllerOpener* nvme = nullptr;
  // What the host uses now (a mounted disk, an addressed NIC, the operator's devices.reserved), read
  // again before every step: a device the host took since the VM let it go is never reset, erased
  // or scrubbed. Its step fails naming the use, and the device is quarantined.
  std::function<Result<std::vector<numa::HostUse>>()> host_use;
};
std::vector<CleaningStep> host_cleaning_steps(const CleaningParts& parts, const numa::PciFunction& function);

// The steps on a host whose devices libvirt binds (managed hostdevs): each one skipped, saying who
// does it or that nothing does, so a create after a delete is not kept waiting; except an NVMe's
// erase on a real host, which nothing does there and which fails, so the controller is quarantined
// rather than given to the next tenant with this one's data. A simulated host has no media.
enum class ManagedHost { simulated, real };
std::vector<CleaningStep> libvirt_managed_cleaning_steps(const numa::PciFunction& function, ManagedHost host);

}  // namespace hostagent::devices
