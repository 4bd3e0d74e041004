// api/http socket_room: SIOCOUTQ against SO_SNDBUF.
#include "socket_room.hpp"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

namespace hostagent::api::detail {

SocketRoom socket_room(int fd) {
  SocketRoom room;
  int queued = 0;
  int limit = 0;
  socklen_t length = sizeof(limit);
  // SIOCOUTQ: the bytes still in the send queue, unix(7) and tcp(7) alike (for a unix socket its
  // memory, skb overhead included, as SO_SNDBUF counts it: the kernel blocks a writer once that
  // reaches the limit, so the two compare). SO_SNDBUF reads back what the kernel uses: twice what
  // was set (socket(7)).
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0 || ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &limit, &length) != 0) {
    return room;
  }
  room.known = true;
  room.empty = queued == 0;
  room.free = limit > queued ? static_cast<std::size_t>(limit - queued) : 0;
  return room;
}

bool set_send_buffer(int fd, std::size_t bytes) {
  const int value = static_cast<int>(bytes);
  return ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, sizeof(value)) == 0;
}

}  // namespace hostagent::api::detail
