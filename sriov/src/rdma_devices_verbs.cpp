// sriov/rdma_devices_verbs: RDMA devices through libibverbs (rdma-core 44): ibv_query_device for the
// node GUID, ibv_query_port for state and link layer, ibv_query_gid_table for the GIDs with their
// type and netdev. What sysfs shows, as the devices a process can open see it.
#include <endian.h>
#include <infiniband/verbs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "hostagent/sriov/rdma_devices.hpp"
#include "rdma_text.hpp"

namespace hostagent::sriov {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct ContextDeleter {
  void operator()(ibv_context* context) const { ibv_close_device(context); }
};
using DeviceList = std::unique_ptr<ibv_device*, DeviceListDeleter>;
using Context = std::unique_ptr<ibv_context, ContextDeleter>;

const char* state_name(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_DOWN:
      return "DOWN";
    case IBV_PORT_INIT:
      return "INIT";
    case IBV_PORT_ARMED:
      return "ARMED";
    case IBV_PORT_ACTIVE:
      return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "ACTIVE_DEFER";
    default:
      return "NOP";
  }
}

// sysfs prints gid_type_str[]: IB and RoCE v1 share "IB/RoCE v1" (drivers/infiniband/core/cache.c).
const char* gid_type_name(uint32_t type) {
  return type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1";
}

std::string netdev_name(uint32_t ifindex) {
  char name[IF_NAMESIZE] = {};
  if (ifindex == 0 || if_indextoname(ifindex, name) == nullptr) return "";
  return name;
}

// The PCI function from the device's sysfs directory, as the sysfs reader finds it.
std::optional<numa::PciAddress> pci_of(const ibv_device* device) {
  std::error_code ec;
  const auto target = std::filesystem::canonical(std::filesystem::path(device->ibdev_path) / "device", ec);
  if (ec) return std::nullopt;
  auto pci = numa::PciAddress::parse(target.filename().string());
  return pci.ok() ? std::optional<numa::PciAddress>(*pci) : std::nullopt;
}

Error verbs_error(int err, const std::string& what) {
  return Error{err == EACCES || err == EPERM ? ErrorCode::io_error : ErrorCode::internal,
               what + ": " + std::strerror(err)};
}

Status read_gids(ibv_context* context, const std::string& name, std::vector<RdmaPort>& ports, size_t table_size) {
  std::vector<ibv_gid_entry> entries(table_size);
  const ssize_t count = ibv_query_gid_table(context, entries.data(), entries.size(), 0);
  if (count < 0) return verbs_error(static_cast<int>(-count), "ibv_query_gid_table on " + name);
  for (ssize_t i = 0; i < count; ++i) {
    const auto& e = entries[static_cast<std::size_t>(i)];
    if (e.port_num == 0 || e.port_num > ports.size()) continue;
    detail::GidBytes bytes{};
    std::memcpy(bytes.data(), e.gid.raw, bytes.size());
    ports[e.port_num - 1].gids.push_back(RdmaGid{static_cast<int>(e.gid_index), detail::format_gid(bytes),
                                                 gid_type_name(e.gid_type), netdev_name(e.ndev_ifindex)});
  }
  for (auto& port : ports) {
    std::sort(port.gids.begin(), port.gids.end(), [](const RdmaGid& a, const RdmaGid& b) { return a.index < b.index; });
    if (port.link_layer == "InfiniBand" && !port.gids.empty() && port.gids.front().index == 0) {
      port.port_guid = detail::interface_id(port.gids.front().gid);
    }
  }
  return ok_status();
}

Result<RdmaDevice> read_device(ibv_device* device) {
  RdmaDevice out;
  out.name = ibv_get_device_name(device);
  out.pci = pci_of(device);
  errno = 0;
  Context context(ibv_open_device(device));
  if (!context) return verbs_error(errno != 0 ? errno : ENODEV, "open RDMA device " + out.name + " (ibv_open_device)");
  ibv_device_attr attr{};
  if (const int err = ibv_query_device(context.get(), &attr); err != 0) {
    return verbs_error(err, "ibv_query_device on " + out.name);
  }
  out.node_guid = detail::format_guid(be64toh(attr.node_guid));
  size_t table_size = 0;
  for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
    ibv_port_attr port{};
    if (const int err = ibv_query_port(context.get(), p, &port); err != 0) {
      return verbs_error(err, "ibv_query_port " + std::to_string(p) + " on " + out.name);
    }
    // IBV_LINK_LAYER_UNSPECIFIED is what older providers report for InfiniBand.
    out.ports.push_back(RdmaPort{
        p, state_name(port.state), port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand", "", {}});
    table_size += static_cast<size_t>(port.gid_tbl_len);
  }
  HA_TRY_STATUS(read_gids(context.get(), out.name, out.ports, table_size));
  return out;
}

}  // namespace

Result<std::vector<RdmaDevice>> read_rdma_devices_verbs() {
  int count = 0;
  errno = 0;
  DeviceList list(ibv_get_device_list(&count));
  if (!list) {
    // ENOSYS: the kernel has no RDMA support (ib_uverbs absent): a host without RDMA devices.
    if (errno == ENOSYS) return std::vector<RdmaDevice>{};
    return verbs_error(errno != 0 ? errno : EIO, "list RDMA devices (ibv_get_device_list)");
  }
  std::vector<RdmaDevice> out;
  for (int i = 0; i < count; ++i) {
    HA_TRY(auto device, read_device(list.get()[i]));
    out.push_back(std::move(device));
  }
  std::sort(out.begin(), out.end(), [](const RdmaDevice& a, const RdmaDevice& b) { return a.name < b.name; });
  return out;
}

}  // namespace hostagent::sriov
