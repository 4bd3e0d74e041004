// discovery/interface_addresses_libnl: the live host's addresses over rtnetlink (libnl-route-3's
// address cache, one RTM_GETADDR dump). Read-only.
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/socket.h>

#include <array>
#include <memory>

#include "hostagent/discovery/host_use_reader.hpp"

namespace hostagent::discovery {
namespace {

struct SocketDeleter {
  void operator()(nl_sock* sock) const { nl_socket_free(sock); }
};
struct CacheDeleter {
  void operator()(nl_cache* cache) const { nl_cache_free(cache); }
};

Error nl_error(int err, const std::string& what) {
  return Error{ErrorCode::io_error, what + ": " + nl_geterror(err)};
}

}  // namespace

Result<std::vector<InterfaceAddress>> interface_addresses() {
  std::unique_ptr<nl_sock, SocketDeleter> sock(nl_socket_alloc());
  if (!sock) return Error{ErrorCode::internal, "nl_socket_alloc failed (out of memory)"};
  if (const int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0) return nl_error(err, "connect to rtnetlink");
  nl_cache* raw = nullptr;
  if (const int err = rtnl_addr_alloc_cache(sock.get(), &raw); err < 0) {
    return nl_error(err, "read the host's addresses (RTM_GETADDR)");
  }
  std::unique_ptr<nl_cache, CacheDeleter> cache(raw);
  std::vector<InterfaceAddress> out;
  for (nl_object* object = nl_cache_get_first(cache.get()); object != nullptr; object = nl_cache_get_next(object)) {
    auto* addr = reinterpret_cast<rtnl_addr*>(object);
    // Link- and host-scope addresses (fe80::, 127.0.0.1) carry nothing off the host.
    if (rtnl_addr_get_scope(addr) >= RT_SCOPE_LINK) continue;
    std::array<char, IF_NAMESIZE> name{};
    if (if_indextoname(static_cast<unsigned>(rtnl_addr_get_ifindex(addr)), name.data()) == nullptr) continue;
    std::array<char, 128> text{};
    nl_addr2str(rtnl_addr_get_local(addr), text.data(), text.size());
    out.push_back({name.data(), text.data()});
  }
  return out;
}

}  // namespace hostagent::discovery
