// render: the guest that mirrors the host. From the host model, the VM's shape and its
// placement, renders the libvirt domain XML (q35, one pxb-pcie per guest NUMA cell, an emulated
// PCIe switch per host switch used, pinned vCPUs, strict per-cell hugepage memory) and the NCCL
// topology file with the PCI addresses the guest will see. Built with pugixml: nothing from a
// request is ever spliced into XML text.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::render {

// A NIC VF's RDMA side as the host saw it before the VM took it (the VM record's rdma entry).
struct NicRdma {
  std::string node_guid;                 // "xxxx:xxxx:xxxx:xxxx": the guest's device reports the same
  std::optional<int> roce_v2_gid_index;  // RoCE: the GID NCCL picks by default on the host
  std::string link_layer;                // "Ethernet" (RoCE) or "InfiniBand"; "" unknown
};

// Where the guest finds the NCCL topology file the seed delivers, and NCCL's own settings file that
// names it (NCCL reads /etc/nccl.conf at init: src/misc/param.cc initEnvFunc; the environment wins).
// Not /var/run/nvidia-topologyd/virtualTopology.xml, NCCL's default and the Vela recipe's: /run is
// a tmpfs, and cloud-init writes the file once per instance, not once per boot.
inline constexpr const char* kGuestNcclTopologyPath = "/etc/nccl/hostagent-topology.xml";
inline constexpr const char* kGuestNcclConfPath = "/etc/nccl.conf";
// The options the guest's nvidia module is loaded with (modprobe.d(5): read by modprobe at each load).
inline constexpr const char* kGuestNvidiaOptionsPath = "/etc/modprobe.d/hostagent-nvidia.conf";

struct GuestOptions {
  std::string name;                 // the domain name; validated: [A-Za-z0-9_.-]{1,64}
  std::string domain_type = "kvm";  // kvm | qemu | test
  std::string emulator;             // "" leaves libvirt's default
  bool managed_hostdevs = true;     // libvirt binds to vfio-pci itself (until hostagent prepares devices)
  std::vector<MacAddress> vf_macs;  // one per VF in placement order; empty: derived (vf_macs.hpp)
  std::optional<Uuid> uuid;         // nullopt lets libvirt choose
  // The host's identity (its /etc/machine-id): with the VM's UUID, what derived VF MACs come from,
  // so same-named VMs on two hosts of one fabric never share a MAC. "" outside a host (a render
  // for review).
  std::string host_id;
  // An absolute path on the host; "" for none. virtlogd copies the guest's serial console into it
  // (appending), so an operator can read what a guest printed after the fact, even after it is gone.
  std::string console_log;
  // An absolute path on the host; "" for none. A cloud-init NoCloud seed (cloudinit/),
  // attached as a read-only SATA CD-ROM on q35's built-in AHCI controller.
  std::string seed_iso;
  // By VF host address: the NCCL topology gives that VF's <net> its GUID and notes its GID index.
  std::map<numa::PciAddress, NicRdma> nic_rdma;
};

// The files the guest gets at its first boot through the seed's vendor-data: the NCCL topology file
// at kGuestNcclTopologyPath and nccl_conf at kGuestNcclConfPath (none for a guest without GPUs),
// and nvidia_options at kGuestNvidiaOptionsPath where there are any. The daemon's seed and
// verify-guest's stand-in both carry exactly these.
struct GuestFileContent {
  std::string path;
  std::string content;
  // A kernel module the file configures: loaded before the file was written (at the first boot the
  // guest's udev loads it before cloud-init runs), it is loaded again where nothing holds it yet.
  std::string reload_module;
};
struct RenderedGuest;
std::vector<GuestFileContent> guest_files(const RenderedGuest& guest);

// Where a host function appears inside the guest.
struct GuestDeviceAddress {
  numa::PciAddress host;
  numa::PciAddress guest;
  std::string role;  // "gpu", "nic", "nvme", "nvswitch", "companion"
  int guest_cell = 0;
};

struct RenderedGuest {
  std::string domain_xml;
  std::string nccl_topology_xml;
  // /etc/nccl.conf for a guest with GPUs ("" without): NCCL_TOPO_FILE, the Vela recipe's
  // NCCL_IB_PCI_RELAXED_ORDERING=1, and NCCL_IB_GID_INDEX when every NIC's RoCE v2 GID index is
  // known and the same (NCCL takes one index for all).
  std::string nccl_conf;
  // The modprobe.d file for the guest's nvidia module, "" for none: "options nvidia
  // NVreg_NvLinkDisable=1" for a VM whose GPUs an NVSwitch fabric joins that it does not get
  // (numa::GuestNvlink::disabled); a VM that trains its fabric, or has none, never gets it.
  std::string nvidia_options;
  std::vector<GuestDeviceAddress> addresses;
};

// The MAC each VF of the placement gets, with the VF's host address, in placement order (each GPU's
// VFs, then the extra VFs): what the domain XML gives the guest, and what device preparation sets
// on the VF over netlink before the VM starts.
Result<std::vector<std::pair<numa::PciAddress, MacAddress>>> vf_mac_addresses(const vmtemplates::VmTemplate& shape,
                                                                              const numa::Placement& placement,
                                                                              const GuestOptions& options);

// QEMU's threads that zero each guest cell's memory before the guest runs (<allocation threads>):
// the template's count, or the VM's pinned CPUs in its smallest cell, at least 1 and at most 16.
int allocation_threads(const vmtemplates::VmTemplate& shape, const numa::Placement& placement);

Result<RenderedGuest> render_guest(const numa::HostModel& host, const vmtemplates::VmTemplate& shape,
                                   const numa::Placement& placement, const GuestOptions& options);

}  // namespace hostagent::render
