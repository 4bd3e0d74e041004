// api/http socket_room: how many more bytes a connected socket's kernel send queue takes before a
// write would wait for the peer to read, so an event stream writes only what fits and keeps room
// for the last frame it may have to send a reader that stopped reading.
#pragma once

#include <cstddef>

namespace hostagent::api::detail {

struct SocketRoom {
  std::size_t free = 0;  // bytes that fit now
  bool empty = false;    // nothing is queued: a frame larger than the queue may still be written
  bool known = false;    // false when the kernel would not say (the caller writes as if all fits)
};

SocketRoom socket_room(int fd);

// Sets the kernel send queue of an event stream's socket (SO_SNDBUF): what a reader that stops
// reading can make the kernel hold for it. False when refused.
bool set_send_buffer(int fd, std::size_t bytes);

}  // namespace hostagent::api::detail
