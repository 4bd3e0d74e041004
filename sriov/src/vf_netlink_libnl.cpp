// sriov/vf_netlink_libnl: VfNetlink over rtnetlink with libnl-route-3 (Debian 12: 3.7). Reads use
// rtnl_link_get_kernel, whose RTM_GETLINK carries IFLA_EXT_MASK = RTEXT_FILTER_VF so the kernel adds
// IFLA_NUM_VF and IFLA_VFINFO_LIST; writes are one rtnl_link_change with the VF in the change
// link's VF list, which libnl sends as IFLA_VFINFO_LIST / IFLA_VF_INFO (lib/route/link/sriov.c).
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>
#include <netlink/socket.h>

#include <array>
#include <cstdio>
#include <memory>

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/sriov/vf_netlink.hpp"

namespace hostagent::sriov {
namespace {

struct SocketDeleter {
  void operator()(nl_sock* sock) const { nl_socket_free(sock); }
};
struct LinkDeleter {
  void operator()(rtnl_link* link) const { rtnl_link_put(link); }
};
struct VfDeleter {
  void operator()(rtnl_link_vf* vf) const { rtnl_link_vf_put(vf); }
};
struct AddrDeleter {
  void operator()(nl_addr* addr) const { nl_addr_put(addr); }
};
using Socket = std::unique_ptr<nl_sock, SocketDeleter>;
using Link = std::unique_ptr<rtnl_link, LinkDeleter>;
using Vf = std::unique_ptr<rtnl_link_vf, VfDeleter>;
using Addr = std::unique_ptr<nl_addr, AddrDeleter>;

Error nl_error(int err, const std::string& what) {
  const int code = err < 0 ? -err : err;
  ErrorCode ec = ErrorCode::io_error;
  if (code == NLE_OBJ_NOTFOUND || code == NLE_NODEV) ec = ErrorCode::not_found;
  if (code == NLE_INVAL || code == NLE_RANGE) ec = ErrorCode::invalid_argument;
  if (code == NLE_OPNOTSUPP) ec = ErrorCode::unsupported;
  if (code == NLE_BUSY) ec = ErrorCode::conflict;
  return Error{ec, what + ": " + nl_geterror(err)};
}

Status check_name(const std::string& pf_netdev) {
  if (pf_netdev.empty() || pf_netdev.size() >= IFNAMSIZ) {
    return Error{ErrorCode::invalid_argument, "PF netdev '" + pf_netdev + "': a network interface name has 1 to " +
                                                  std::to_string(IFNAMSIZ - 1) + " characters"};
  }
  return ok_status();
}

Result<Socket> connect_route() {
  Socket sock(nl_socket_alloc());
  if (!sock) return Error{ErrorCode::internal, "nl_socket_alloc failed (out of memory)"};
  if (const int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0) {
    return nl_error(err, "connect to rtnetlink");
  }
  return sock;
}

Result<Link> get_link(nl_sock* sock, const std::string& pf_netdev) {
  rtnl_link* raw = nullptr;
  if (const int err = rtnl_link_get_kernel(sock, 0, pf_netdev.c_str(), &raw); err < 0) {
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) {
      return Error{ErrorCode::not_found, "network interface '" + pf_netdev +
                                             "' does not exist (check the PF netdev name in the host configuration)"};
    }
    return nl_error(err, "read link " + pf_netdev);
  }
  return Link(raw);
}

// The VF's entry in the link, checked against IFLA_NUM_VF first: libnl dereferences the VF list
// without a check when the link has none.
Result<Vf> find_vf(rtnl_link* link, const std::string& pf_netdev, int vf) {
  uint32_t num = 0;
  if (rtnl_link_get_num_vf(link, &num) < 0 || num == 0) {
    return Error{ErrorCode::not_found, pf_netdev + " has no SR-IOV VFs (not a PF, or its sriov_numvfs is 0); " +
                                           vf_name(pf_netdev, vf) + " does not exist"};
  }
  if (vf < 0 || static_cast<uint32_t>(vf) >= num) {
    return Error{ErrorCode::not_found,
                 pf_netdev + " has " + std::to_string(num) + " VFs; " + vf_name(pf_netdev, vf) + " does not exist"};
  }
  Vf found(rtnl_link_vf_get(link, static_cast<uint32_t>(vf)));
  if (!found) return Error{ErrorCode::not_found, "the kernel did not report " + vf_name(pf_netdev, vf)};
  return found;
}

std::string mac_text(nl_addr* addr) {
  if (addr == nullptr || nl_addr_get_len(addr) != 6) return "00:00:00:00:00:00";
  const auto* b = static_cast<const unsigned char*>(nl_addr_get_binary_addr(addr));
  std::array<char, 24> buf{};
  std::snprintf(buf.data(), buf.size(), "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
  return buf.data();
}

// libnl leaves out what the kernel sent as 0 or -1 (rtnl_link_sriov_parse_vflist): no VLAN is VLAN
// 0, no rate is no limit, no trust or spoofchk is a driver that does not report it.
VfState state_of(rtnl_link_vf* vf) {
  VfState s;
  nl_addr* addr = nullptr;
  if (rtnl_link_vf_get_addr(vf, &addr) == 0) s.mac = mac_text(addr);
  nl_vf_vlans_t* vlans = nullptr;
  if (rtnl_link_vf_get_vlans(vf, &vlans) == 0) {
    if (vlans->size > 0) {
      s.vlan = static_cast<int>(vlans->vlans[0].vf_vlan);
      s.qos = static_cast<int>(vlans->vlans[0].vf_vlan_qos);
    }
    rtnl_link_vf_vlan_put(vlans);
  }
  uint32_t value = 0;
  if (rtnl_link_vf_get_trust(vf, &value) == 0) s.trust = value != 0;
  if (rtnl_link_vf_get_spoofchk(vf, &value) == 0) s.spoofchk = value != 0;
  if (rtnl_link_vf_get_linkstate(vf, &value) == 0) {
    if (value == IFLA_VF_LINK_STATE_AUTO) s.link_state = LinkState::automatic;
    if (value == IFLA_VF_LINK_STATE_ENABLE) s.link_state = LinkState::enable;
    if (value == IFLA_VF_LINK_STATE_DISABLE) s.link_state = LinkState::disable;
  }
  nl_vf_rate rate{};
  if (rtnl_link_vf_get_rate(vf, &rate) == 0) {
    s.min_tx_rate_mbps = rate.min_tx_rate;
    s.max_tx_rate_mbps = rate.api == RTNL_LINK_VF_RATE_API_OLD ? rate.rate : rate.max_tx_rate;
  }
  return s;
}

uint32_t link_state_value(LinkState state) {
  switch (state) {
    case LinkState::automatic:
      return IFLA_VF_LINK_STATE_AUTO;
    case LinkState::enable:
      return IFLA_VF_LINK_STATE_ENABLE;
    case LinkState::disable:
      return IFLA_VF_LINK_STATE_DISABLE;
  }
  return IFLA_VF_LINK_STATE_AUTO;
}

Status set_mac(rtnl_link_vf* vf, const std::string& mac) {
  HA_TRY(const auto text, hostagent::mac_text(mac, "mac"));
  nl_addr* raw = nullptr;
  if (const int err = nl_addr_parse(text.c_str(), AF_LLC, &raw); err < 0) return nl_error(err, "parse MAC " + text);
  Addr addr(raw);
  rtnl_link_vf_set_addr(vf, addr.get());  // takes its own reference
  return ok_status();
}

Status set_vlan(rtnl_link_vf* vf, int vlan, int qos) {
  nl_vf_vlans_t* vlans = nullptr;
  if (const int err = rtnl_link_vf_vlan_alloc(&vlans, 1); err < 0) return nl_error(err, "allocate VLAN");
  vlans->vlans[0].vf_vlan = static_cast<uint32_t>(vlan);
  vlans->vlans[0].vf_vlan_qos = static_cast<uint32_t>(qos);
  vlans->vlans[0].vf_vlan_proto = ETH_P_8021Q;  // one 802.1Q tag: libnl sends IFLA_VF_VLAN
  rtnl_link_vf_set_vlans(vf, vlans);            // takes its own reference
  rtnl_link_vf_vlan_put(vlans);
  return ok_status();
}

// IFLA_VF_RATE carries both limits; the one not being changed keeps its current value.
void set_rate(rtnl_link_vf* vf, const VfSettings& s, const VfState& current) {
  nl_vf_rate rate{};
  rate.api = RTNL_LINK_VF_RATE_API_NEW;
  rate.min_tx_rate = s.min_tx_rate_mbps.value_or(current.min_tx_rate_mbps);
  rate.max_tx_rate = s.max_tx_rate_mbps.value_or(current.max_tx_rate_mbps);
  rtnl_link_vf_set_rate(vf, &rate);
}

Status fill(rtnl_link_vf* vf, const VfSettings& s, const VfState& current) {
  if (s.mac) HA_TRY_STATUS(set_mac(vf, *s.mac));
  // IFLA_VF_VLAN sets VLAN and QoS together: a QoS alone keeps the VLAN, a VLAN alone clears QoS.
  if (s.vlan || s.qos) HA_TRY_STATUS(set_vlan(vf, s.vlan.value_or(current.vlan), s.qos.value_or(0)));
  if (s.trust) rtnl_link_vf_set_trust(vf, *s.trust ? 1 : 0);
  if (s.spoofchk) rtnl_link_vf_set_spoofchk(vf, *s.spoofchk ? 1 : 0);
  if (s.link_state) rtnl_link_vf_set_linkstate(vf, link_state_value(*s.link_state));
  if (s.min_tx_rate_mbps || s.max_tx_rate_mbps) set_rate(vf, s, current);
  return ok_status();
}

class LibnlVfNetlink final : public VfNetlink {
 public:
  Result<VfState> read(const std::string& pf_netdev, int vf) override {
    HA_TRY_STATUS(check_name(pf_netdev));
    HA_TRY(const auto sock, connect_route());
    HA_TRY(const auto link, get_link(sock.get(), pf_netdev));
    HA_TRY(const auto entry, find_vf(link.get(), pf_netdev, vf));
    return state_of(entry.get());
  }

  Status apply(const std::string& pf_netdev, int vf, const VfSettings& settings) override {
    HA_TRY_STATUS(check_name(pf_netdev));
    if (settings.empty()) return ok_status();
    HA_TRY(const auto sock, connect_route());
    HA_TRY(const auto link, get_link(sock.get(), pf_netdev));
    HA_TRY(const auto entry, find_vf(link.get(), pf_netdev, vf));
    const VfState current = state_of(entry.get());
    Vf change(rtnl_link_vf_alloc());
    Link changes(rtnl_link_alloc());
    if (!change || !changes) return Error{ErrorCode::internal, "libnl allocation failed (out of memory)"};
    rtnl_link_vf_set_index(change.get(), static_cast<uint32_t>(vf));
    HA_TRY_STATUS(fill(change.get(), settings, current));
    if (const int err = rtnl_link_vf_add(changes.get(), change.get()); err < 0) {
      return nl_error(err, "add " + vf_name(pf_netdev, vf) + " to the change request");
    }
    if (const int err = rtnl_link_change(sock.get(), link.get(), changes.get(), 0); err < 0) {
      return nl_error(err, "set " + vf_name(pf_netdev, vf) + " (RTM_NEWLINK IFLA_VFINFO_LIST)");
    }
    return ok_status();
  }
};

}  // namespace

std::unique_ptr<VfNetlink> make_libnl_vf_netlink() {
  return std::make_unique<LibnlVfNetlink>();
}

}  // namespace hostagent::sriov
