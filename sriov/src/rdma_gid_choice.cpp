// sriov/rdma_gid_choice: which GID a VM's NCCL uses for RoCE v2, chosen the way NCCL chooses it.
#include <array>

#include "hostagent/sriov/rdma_devices.hpp"
#include "rdma_text.hpp"

namespace hostagent::sriov {
namespace {

// NCCL's preference with its defaults (AF_INET, RoCE v2): IPv4 first; an IPv6 GID counts only when
// it is not link-local (net_ib.cc validGid); the link-local one is what a port without addresses has.
enum class Kind { ipv4_mapped = 0, ipv6_global = 1, link_local = 2 };

Kind kind_of(const detail::GidBytes& g) {
  bool mapped = g[10] == 0xff && g[11] == 0xff;
  for (std::size_t i = 0; i < 10; ++i) mapped = mapped && g[i] == 0;
  if (mapped) return Kind::ipv4_mapped;
  // fe80::/10 (RFC 4291 §2.5.6).
  if (g[0] == 0xfe && (g[1] & 0xc0) == 0x80) return Kind::link_local;
  return Kind::ipv6_global;
}

}  // namespace

std::optional<int> roce_v2_gid_index(const RdmaPort& port, const std::optional<std::string>& netdev) {
  std::array<std::optional<int>, 3> best{};
  for (const auto& gid : port.gids) {
    if (gid.type != "RoCE v2" || (netdev && gid.netdev != *netdev)) continue;
    const auto bytes = detail::parse_gid(gid.gid, "GID " + std::to_string(gid.index));
    if (!bytes.ok() || detail::is_zero(*bytes)) continue;
    auto& slot = best[static_cast<std::size_t>(kind_of(*bytes))];
    if (!slot || gid.index < *slot) slot = gid.index;
  }
  for (const auto& slot : best) {
    if (slot) return slot;
  }
  return std::nullopt;
}

}  // namespace hostagent::sriov
