// daemon/vf_rdma: the RDMA side of a placement's NIC VFs (see vf_rdma.hpp).
#include "vf_rdma.hpp"

namespace hostagent::daemon {
namespace {

state::VfRdma entry_of(const numa::PciAddress& vf, const sriov::RdmaDevice& device) {
  // A VF's RDMA device has one port (mlx5 VFs: port 1).
  const auto& port = device.ports.front();
  state::VfRdma entry;
  entry.vf = vf;
  entry.device = device.name;
  entry.port = port.port;
  entry.state = port.state;
  entry.link_layer = port.link_layer;
  if (port.link_layer == "Ethernet") entry.roce_v2_gid_index = sriov::roce_v2_gid_index(port);
  entry.node_guid = device.node_guid;
  entry.port_guid = port.port_guid;
  return entry;
}

}  // namespace

Result<std::vector<state::VfRdma>> read_vf_rdma(const HostReaders::RdmaDevicesReader& devices_of,
                                                const numa::Placement& placement) {
  std::vector<state::VfRdma> out;
  auto nics = numa::placed_vfs(placement);
  for (const auto& nic : placement.whole_nics) nics.push_back(nic.address);  // an HCA given whole: the same
  for (const auto& vf : nics) {
    HA_TRY(const auto devices, devices_of(vf));
    if (devices.empty() || devices.front().ports.empty()) continue;
    out.push_back(entry_of(vf, devices.front()));
  }
  return out;
}

}  // namespace hostagent::daemon
