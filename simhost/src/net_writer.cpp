// simhost/net_writer: network interfaces (DEVDIR/net/NAME, net/core/net-sysfs.c) and RDMA devices
// (DEVDIR/infiniband/NAME, drivers/infiniband/core/sysfs.c) of each function, with the class links
// /sys/class/{net,infiniband}/NAME. Addresses derive from the PCI address: trees are reproducible.
#include <array>
#include <cstdio>
#include <string>

#include "kernel_format.hpp"
#include "writers.hpp"

namespace hostagent::simhost::detail {
namespace {

using Mac = std::array<uint8_t, 6>;

// A locally administered unicast address (first octet 0x02) spelling the PCI address:
// 0000:1a:00.1, interface 0 -> 02:00:1a:00:01:00.
Mac mac_for(const PciAddress& addr, std::size_t index) {
  const auto domain = static_cast<uint8_t>(addr.domain);
  return {0x02, domain, addr.bus, addr.device, addr.function, static_cast<uint8_t>(index)};
}

std::string mac_text(const Mac& m) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

// Modified EUI-64 from a MAC (RFC 4291 appendix A): flip the U/L bit, insert ff:fe in the middle.
std::array<uint8_t, 8> eui64(const Mac& m) {
  return {static_cast<uint8_t>(m[0] ^ 0x02), m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
}

std::string guid_attr(const Mac& m) {
  const auto e = eui64(m);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02x%02x:%02x%02x:%02x%02x:%02x%02x\n", e[0], e[1], e[2], e[3], e[4], e[5], e[6],
                e[7]);
  return buf;
}

// RoCE GID 0 and 1: the IPv6 link-local address of the netdev, fe80::/64 + EUI-64.
std::string link_local_gid(const Mac& m) {
  const auto e = eui64(m);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "fe80:0000:0000:0000:%02x%02x:%02x%02x:%02x%02x:%02x%02x\n", e[0], e[1], e[2], e[3],
                e[4], e[5], e[6], e[7]);
  return buf;
}

void write_interface(TreeWriter& w, const PlannedFunction& f, std::size_t index, int ifindex) {
  const std::string& name = f.spec->net_interfaces[index];
  const std::string dir = f.dir + "/net/" + name;
  w.file(dir + "/address", mac_text(mac_for(f.addr, index)) + "\n");
  w.file(dir + "/broadcast", "ff:ff:ff:ff:ff:ff\n");
  w.file(dir + "/addr_len", "6\n");
  w.file(dir + "/mtu", "1500\n");
  w.file(dir + "/operstate", "up\n");
  w.file(dir + "/carrier", "1\n");
  w.file(dir + "/ifindex", decimal_attr(ifindex));
  w.file(dir + "/iflink", decimal_attr(ifindex));
  w.file(dir + "/type", "1\n");  // ARPHRD_ETHER
  w.file(dir + "/dev_port", decimal_attr(static_cast<int64_t>(index)));
  w.link(dir + "/device", f.dir);
  w.link("/sys/class/net/" + name, dir);
}

void write_rdma_port(TreeWriter& w, const std::string& port, const Mac& mac, const std::string& netdev) {
  w.file(port + "/state", "4: ACTIVE\n");
  w.file(port + "/phys_state", "5: LinkUp\n");
  w.file(port + "/link_layer", "Ethernet\n");
  w.file(port + "/lid", "0x0\n");
  w.file(port + "/lid_mask_count", "0\n");
  w.file(port + "/sm_lid", "0x0\n");
  // The first two GIDs of a RoCE port: the link-local address as RoCE v1 and as RoCE v2.
  const std::array<const char*, 2> types = {"IB/RoCE v1\n", "RoCE v2\n"};
  for (std::size_t i = 0; i < types.size(); ++i) {
    const std::string n = std::to_string(i);
    w.file(port + "/gids/" + n, link_local_gid(mac));
    w.file(port + "/gid_attrs/types/" + n, types[i]);
    w.file(port + "/gid_attrs/ndevs/" + n, netdev + "\n");
  }
}

void write_rdma_device(TreeWriter& w, const PlannedFunction& f, const std::string& name) {
  const std::string dir = f.dir + "/infiniband/" + name;
  const Mac mac = mac_for(f.addr, 0);
  const auto& ifaces = f.spec->net_interfaces;
  w.file(dir + "/node_guid", guid_attr(mac));
  w.file(dir + "/sys_image_guid", guid_attr(mac));
  w.file(dir + "/node_type", "1: CA\n");
  w.file(dir + "/node_desc", name + "\n");
  write_rdma_port(w, dir + "/ports/1", mac, ifaces.empty() ? "" : ifaces.front());
  w.link(dir + "/device", f.dir);
  w.link("/sys/class/infiniband/" + name, dir);
}

}  // namespace

void write_network(TreeWriter& w, const PciPlan& plan) {
  int ifindex = 2;  // 1 is the loopback device
  for (const auto& f : plan.functions) {
    for (std::size_t i = 0; i < f.spec->net_interfaces.size(); ++i) {
      write_interface(w, f, i, ifindex++);
    }
    for (const auto& name : f.spec->rdma_devices) write_rdma_device(w, f, name);
  }
}

}  // namespace hostagent::simhost::detail
