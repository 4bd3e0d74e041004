// The end-to-end boot's guest side: hostagentd, configured for the emulated GPU host, as a child
// process driven with hostagentctl over its unix socket, the way an operator drives it; and views
// of what it did that do not go through hostagent: libvirt's (its C API) and the kernel's (sysfs).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/pci_address.hpp"
#include "test_support.hpp"

namespace hostagent::testing::e2e {

inline constexpr int kVfsPerPf = 2;
inline constexpr const char* kVfTemplate = "e2e-nvme-vf";        // 1 vCPU, 64 MiB, one NVMe VF
inline constexpr const char* kBrokenTemplate = "e2e-no-kernel";  // the same, with a kernel that is not there

// The emulated host's NVMe PFs (one per node) and GPU stand-ins, from sysfs.
struct EmulatedDevices {
  std::vector<PciAddress> nvme_pfs;
  std::vector<PciAddress> gpus;
};
EmulatedDevices emulated_devices();

// The VFs of a PF now, from its virtfnN links.
std::vector<PciAddress> virtfns(const PciAddress& pf);
// The VFs of every NVMe PF now.
std::vector<PciAddress> all_vfs();

// A VF as the host keeps it for VMs: created with autoprobe off, on no driver, no override.
void check_vf_idle(const PciAddress& vf);

// hostagentd with preparation "hostagent", devices.sriov creating kVfsPerPf VFs on each NVMe PF, the
// edu devices as GPUs, and the two templates; its state under `dir`, which outlives a restart.
class Daemon {
 public:
  // `more_config`: top-level YAML sections appended to the configuration (the hygiene boot's
  // known-good ROMs); `reserved`: devices.reserved, kept out of placement (the hygiene boot's VFs,
  // when a VM is to get the tenant's controller).
  explicit Daemon(const std::filesystem::path& dir, const std::string& more_config = "",
                  const std::vector<PciAddress>& reserved = {});
  ~Daemon();  // SIGKILL if still running
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts hostagentd (with `arguments` after its --config); true once `hostagentctl host show`
  // answers (it retries until timeout).
  bool start(std::chrono::seconds timeout, const std::vector<std::string>& arguments = {});
  int stop();        // SIGTERM; the exit status, or -1 when it had to be killed after 60 s
  void kill_hard();  // SIGKILL: a crash
  CommandResult ctl(const std::vector<std::string>& args) const;
  // One more template in its template directory (before start: templates are read then).
  void add_template(const std::string& name, const std::string& yaml) const;
  // Whether `owner` has a device record ("@host": the host's own).
  bool has_record(const std::string& owner) const;
  std::string log() const;       // hostagentd's own output, every start's
  std::string log_tail() const;  // its last lines, for failure messages
  std::filesystem::path records_directory() const { return dir_ / "state" / "devices"; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path config_;
  pid_t pid_ = -1;
};

// libvirt's view of one domain, through qemu:///system.
struct DomainView {
  bool exists = false;
  bool running = false;
  std::vector<PciAddress> hostdevs;  // the PCI hostdevs' source addresses
  bool all_unmanaged = true;         // every PCI hostdev has managed='no'
};
DomainView libvirt_domain(const std::string& name);

// The VM's one hostdev: an NVMe VF of one of the PFs, on vfio-pci with its group's device node.
PciAddress check_vm_holds_a_vf(const DomainView& domain);

// What an operator's `virsh destroy; virsh undefine` does, through the C API: hostagent not asked.
void destroy_and_undefine(const std::string& name);

// A transient libvirt storage pool of type dir at `directory`, started (a VM with a boot image gets
// its disk in one: storage.pool); it goes when libvirtd does.
void start_dir_pool(const std::string& name, const std::filesystem::path& directory);

// The tail of libvirt's own logs (libvirtd's and the domain's), for failure messages.
std::string libvirt_logs(const std::string& domain);

// The tenants' whole NVMe controller (QemuInputs::tenant_disk: the hygiene and host-life boots), by
// its PCI IDs: on vfio-pci, or held unbound, there is no serial to read.
PciAddress tenant_controller();
// The block devices (nvmeXnY) whose controller, or multipath subsystem, has the tenant's serial.
std::vector<std::string> tenant_disks();
// What the host has made of the tenant's controller: each block device whose controller, or
// multipath subsystem, has the tenant's serial, and each line of /proc/partitions naming one of
// them or a partition of it (the kernel's partition scan: block/partitions/). Empty while no host
// driver binds the controller.
std::vector<std::string> host_views_of_tenant();

// `hostagentctl host check` on this kernel (issue 47), each verdict against what the emulated host
// is: an IOMMU with its groups, vfio-pci, libvirtd as root, the kernel's release (huge pfnmap BAR
// mapping from 6.12: a warning before), no 1 GiB pages, with the shipped templates, which it cannot
// fit (no GPUs of theirs). The host-life boots run it on both of their kernels.
void check_host_check_reads_this_kernel();

}  // namespace hostagent::testing::e2e
