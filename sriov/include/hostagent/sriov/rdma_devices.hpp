// sriov/rdma_devices: the RDMA devices of the host (one per RoCE/InfiniBand function, VFs included)
// with each port's state and GID table, from sysfs (/sys/class/infiniband, drivers/infiniband/core/
// sysfs.c) or from libibverbs. The RoCE v2 GID index chosen here goes into the VM's API record and
// its NCCL topology.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/numa/pci_address.hpp"

namespace hostagent::sriov {

struct RdmaGid {
  int index = 0;
  std::string gid;     // "fe80:0000:0000:0000:0000:1aff:fe00:0100", as sysfs prints it
  std::string type;    // "IB/RoCE v1", "RoCE v2"
  std::string netdev;  // RoCE: the netdev the GID belongs to; "" on InfiniBand
};

struct RdmaPort {
  int port = 1;
  std::string state;          // "ACTIVE", "DOWN", "INIT", "ARMED", "ACTIVE_DEFER"
  std::string link_layer;     // "Ethernet", "InfiniBand"
  std::string port_guid;      // InfiniBand: the interface ID of GID 0, "xxxx:xxxx:xxxx:xxxx"; "" on RoCE
  std::vector<RdmaGid> gids;  // the valid (non-zero) entries, by index
};

struct RdmaDevice {
  std::string name;  // "mlx5_0"
  // The PCI function behind it; none for software devices (rxe, siw), which have no device link.
  std::optional<numa::PciAddress> pci;
  std::string node_guid;  // "xxxx:xxxx:xxxx:xxxx"
  std::vector<RdmaPort> ports;
};

// From /sys/class/infiniband under the root, in name order; empty when there is no RDMA device.
Result<std::vector<RdmaDevice>> read_rdma_devices_sysfs(const SysfsRoot& sysfs);

// The RDMA devices of one PCI function (a PF or VF its driver registered with the RDMA core), read
// as above; empty when it has none: unbound, on vfio-pci, or not an RDMA function.
Result<std::vector<RdmaDevice>> read_rdma_devices_of(const SysfsRoot& sysfs, const numa::PciAddress& function);

// From libibverbs (the devices this process may open), in name order; empty when there is none.
Result<std::vector<RdmaDevice>> read_rdma_devices_verbs();

// The GID index for RoCE v2 traffic on port, optionally only among netdev's GIDs: an IPv4-mapped
// GID (::ffff:a.b.c.d) first, as NCCL picks by default (NCCL_IB_ADDR_FAMILY=AF_INET,
// NCCL_IB_ROCE_VERSION_NUM=2: src/transport/net_ib.cc ncclIbGetGidIndex), then a global IPv6 one,
// then the link-local one every RoCE port has. The lowest index within a kind; nullopt without any
// RoCE v2 GID.
std::optional<int> roce_v2_gid_index(const RdmaPort& port, const std::optional<std::string>& netdev = std::nullopt);

}  // namespace hostagent::sriov
