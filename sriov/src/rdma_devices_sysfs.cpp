// sriov/rdma_devices_sysfs: RDMA devices as drivers/infiniband/core/sysfs.c shows them under
// /sys/class/infiniband/NAME: node_guid, the device link to the PCI function, and per port its
// state, link_layer and the GID table (gids/N, gid_attrs/types/N, gid_attrs/ndevs/N).
#include <algorithm>
#include <filesystem>

#include "hostagent/sriov/rdma_devices.hpp"
#include "rdma_text.hpp"

namespace hostagent::sriov {
namespace {

const std::string kClass = "/sys/class/infiniband/";

// Numbered entries (ports/1, gids/12) in numeric order; list() sorts by name.
Result<std::vector<int>> numbered(const SysfsRoot& sysfs, const std::string& dir) {
  HA_TRY(const auto names, sysfs.list(dir, true));
  std::vector<int> out;
  for (const auto& name : names) {
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos || name.size() > 6) {
      return Error{ErrorCode::parse_error,
                   "parse " + sysfs.host_path(dir + "/" + name).string() + ": expected a numbered entry"};
    }
    out.push_back(std::stoi(name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "4: ACTIVE" -> "ACTIVE" (port state_show prints the number and the name).
std::string after_colon(const std::string& text) {
  const auto colon = text.find(": ");
  return colon == std::string::npos ? text : text.substr(colon + 2);
}

Result<std::optional<RdmaGid>> read_gid(const SysfsRoot& sysfs, const std::string& port, int index) {
  const std::string n = std::to_string(index);
  HA_TRY(const auto text, sysfs.read(port + "/gids/" + n));
  HA_TRY(const auto bytes, detail::parse_gid(text, sysfs.host_path(port + "/gids/" + n).string()));
  // Unused entries read as all zeros; their gid_attrs refuse to be read.
  if (detail::is_zero(bytes)) return std::optional<RdmaGid>{};
  HA_TRY(const auto type, sysfs.read(port + "/gid_attrs/types/" + n));
  // An entry without a netdev (InfiniBand) fails the read of its ndevs file: no netdev.
  const auto ndev = sysfs.read(port + "/gid_attrs/ndevs/" + n);
  return std::optional<RdmaGid>{RdmaGid{index, detail::format_gid(bytes), type, ndev.ok() ? *ndev : ""}};
}

Result<RdmaPort> read_port(const SysfsRoot& sysfs, const std::string& dir, int number) {
  const std::string port = dir + "/ports/" + std::to_string(number);
  RdmaPort out;
  out.port = number;
  HA_TRY(const auto state, sysfs.read(port + "/state"));
  out.state = after_colon(state);
  HA_TRY(out.link_layer, sysfs.read(port + "/link_layer"));
  HA_TRY(const auto indexes, numbered(sysfs, port + "/gids"));
  for (const int index : indexes) {
    HA_TRY(const auto gid, read_gid(sysfs, port, index));
    if (gid) out.gids.push_back(*gid);
  }
  if (out.link_layer == "InfiniBand" && !out.gids.empty() && out.gids.front().index == 0) {
    out.port_guid = detail::interface_id(out.gids.front().gid);
  }
  return out;
}

// The device link resolved (its target may end in ".."); software devices (rxe, siw) have no
// PCI function behind them, and no device link or one to something else.
std::optional<numa::PciAddress> pci_function(const SysfsRoot& sysfs, const std::string& link) {
  std::error_code ec;
  const auto target = std::filesystem::canonical(sysfs.host_path(link), ec);
  if (ec) return std::nullopt;
  auto pci = numa::PciAddress::parse(target.filename().string());
  return pci.ok() ? std::optional<numa::PciAddress>(*pci) : std::nullopt;
}

Result<RdmaDevice> read_device(const SysfsRoot& sysfs, const std::string& name) {
  const std::string dir = kClass + name;
  RdmaDevice out;
  out.name = name;
  HA_TRY(out.node_guid, sysfs.read(dir + "/node_guid"));
  out.pci = pci_function(sysfs, dir + "/device");
  HA_TRY(const auto ports, numbered(sysfs, dir + "/ports"));
  for (const int number : ports) {
    HA_TRY(auto port, read_port(sysfs, dir, number));
    out.ports.push_back(std::move(port));
  }
  return out;
}

}  // namespace

Result<std::vector<RdmaDevice>> read_rdma_devices_sysfs(const SysfsRoot& sysfs) {
  HA_TRY(const auto names, sysfs.list(kClass, true));
  std::vector<RdmaDevice> out;
  for (const auto& name : names) {
    HA_TRY(auto device, read_device(sysfs, name));
    out.push_back(std::move(device));
  }
  return out;
}

Result<std::vector<RdmaDevice>> read_rdma_devices_of(const SysfsRoot& sysfs, const numa::PciAddress& function) {
  // ib_register_device names the device under its parent: DEVDIR/infiniband/NAME
  // (drivers/infiniband/core/device.c); a function without a driver that registers one has none.
  HA_TRY(const auto names, sysfs.list("/sys/bus/pci/devices/" + function.to_string() + "/infiniband", true));
  std::vector<RdmaDevice> out;
  for (const auto& name : names) {
    HA_TRY(auto device, read_device(sysfs, name));
    out.push_back(std::move(device));
  }
  return out;
}

}  // namespace hostagent::sriov
