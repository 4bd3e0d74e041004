// hostcheck: the host prerequisites that decide a VM's start time and whether it starts at all, each
// pass, warn or fail with what was found and the fix (`hostagentctl host check`). The facts are read
// from procfs and sysfs under a root ("/" on the host, a fixture tree in tests, a simulated host);
// judging them, with the host model and the templates, is computation apart from the reading.
#pragma once

#include <array>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::hostcheck {

enum class Verdict { pass, warn, fail };
std::string_view to_string(Verdict verdict) noexcept;

struct Check {
  std::string name;  // "iommu", "kernel", "template gx3-16x128x1h100", ...
  Verdict verdict = Verdict::pass;
  std::string found;  // what was seen
  std::string fix;    // what to do; "" on a pass
};

// libvirt's QEMU driver process: libvirtd, or the modular daemon virtqemud.
struct LibvirtProcess {
  std::string name;
  int pid = 0;
  uint64_t effective_capabilities = 0;  // /proc/PID/status CapEff
};

// major, minor, release.
using StackVersion = std::array<unsigned, 3>;

// The libvirt and QEMU the host runs, as its libvirtd reports them. The program asks libvirt (this
// module reads files only); nullopt where none was asked (a simulated host, a sysfs tree).
struct StackFacts {
  StackVersion libvirt{};
  StackVersion qemu{};
  std::string unreachable;  // why libvirtd did not answer; "" when it did
};

// The oldest libvirt and QEMU hostagent runs on, Debian 12's (the packages declare the same,
// cmake/packaging.cmake): the renderer needs <qemu:override> (libvirt 8.2) and per-cell
// preallocation threads in a thread-context (QEMU 7.2, libvirt 9.0).
inline constexpr StackVersion kOldestLibvirt = {9, 0, 0};
inline constexpr StackVersion kOldestQemu = {7, 2, 0};
// QEMU zeroes a multi-cell VM's memory backends at once from 9.0 ("initialize backend memory
// objects in parallel"), one after another before.
inline constexpr StackVersion kQemuParallelCells = {9, 0, 0};

// What the checks read from the kernel; nullopt or empty where the root does not have it.
struct HostFacts {
  std::optional<std::string> cmdline;         // /proc/cmdline
  std::optional<std::string> kernel_release;  // /proc/sys/kernel/osrelease
  std::vector<std::string> iommu_units;       // /sys/class/iommu: dmar0, ivhd0, ...
  int iommu_groups = 0;                       // /sys/kernel/iommu_groups
  std::map<std::string, int> group_types;     // each group's default domain type (its `type`), counted
  bool vfio_pci = false;                      // the vfio-pci driver registered (loaded or built in)
  std::optional<LibvirtProcess> libvirt;
  std::optional<StackFacts> stack;  // filled by the caller, not read_facts
};

Result<HostFacts> read_facts(const SysfsRoot& root);

struct CheckOptions {
  numa::HostPolicy policy;  // the daemon's housekeeping CPUs: a template is placed as the daemon would
};

// Every check, in a fixed order: the kernel's, libvirt's and QEMU's versions when `facts.stack` has
// them, then each template's fit on this host when empty (and what the running QEMU lacks of it).
std::vector<Check> check_host(const HostFacts& facts, const numa::HostModel& host,
                              const std::vector<vmtemplates::VmTemplate>& templates, const CheckOptions& options);

}  // namespace hostagent::hostcheck
