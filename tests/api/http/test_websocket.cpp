// The HTTP server's WebSocket channels over a real unix socket, with Beast's own WebSocket client:
// both ways, the close with the channel's reason, input the channel has no room for held and not
// lost, a client that stops reading disconnected while the channel never waits, a client that
// vanishes letting go of the channel, and the stream budget applying to channels too.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <future>
#include <mutex>
#include <optional>

#include "test_fixture.hpp"
#include "test_support.hpp"

namespace hostagent::api {
namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace websocket = boost::beast::websocket;
using hostagent::testing::TempDir;
using testing::kWait;

// A channel as the service's console session documents one: what the client sends is `typed` (at
// most `room` bytes a put until make_room()), what the far side writes waits at most `bound` bytes,
// the oldest dropped and counted beyond, and `wake` is called as the contract says. Its destructor
// tells `released`: the server let go of it.
class TestChannel final : public ByteChannel {
 public:
  TestChannel(std::size_t bound, std::size_t room) : bound_(bound), room_(room) {}
  ~TestChannel() override { released_.set_value(); }
  TestChannel(const TestChannel&) = delete;
  TestChannel& operator=(const TestChannel&) = delete;

  std::string take() override {
    const std::lock_guard lock(mutex_);
    return std::exchange(output_, "");
  }
  std::size_t put(std::string_view bytes) override {
    std::size_t taken = 0;
    {
      const std::lock_guard lock(mutex_);
      taken = std::min(bytes.size(), room_);
      room_ -= taken;
      typed_.append(bytes.substr(0, taken));
    }
    typed_changed_.notify_all();
    return taken;
  }
  void wait(std::function<void()> wake) override {
    {
      const std::lock_guard lock(mutex_);
      ++waits_;
      if (output_.empty() && !ended_ && !room_given_) {
        wake_ = std::move(wake);
        return;
      }
      room_given_ = false;
    }
    wake();
  }
  std::optional<std::string> ended() override {
    const std::lock_guard lock(mutex_);
    return ended_;
  }

  // The far side.
  void write(std::string_view bytes) {
    std::function<void()> wake;
    {
      const std::lock_guard lock(mutex_);
      output_.append(bytes);
      if (output_.size() > bound_) {
        dropped_ += output_.size() - bound_;
        output_.erase(0, output_.size() - bound_);
      }
      wake = std::exchange(wake_, nullptr);
    }
    if (wake) wake();
  }
  void end(std::string reason) {
    std::function<void()> wake;
    {
      const std::lock_guard lock(mutex_);
      ended_ = std::move(reason);
      wake = std::exchange(wake_, nullptr);
    }
    if (wake) wake();
  }
  void make_room(std::size_t room) {
    std::function<void()> wake;
    {
      const std::lock_guard lock(mutex_);
      room_ = room;
      room_given_ = true;
      wake = std::exchange(wake_, nullptr);
    }
    if (wake) wake();
  }
  // Waits (bounded) until what was typed is `expected`.
  bool wait_typed(const std::string& expected) {
    std::unique_lock lock(mutex_);
    return typed_changed_.wait_for(lock, kWait, [&] { return typed_ == expected; });
  }
  std::string typed() {
    const std::lock_guard lock(mutex_);
    return typed_;
  }
  std::uint64_t dropped() {
    const std::lock_guard lock(mutex_);
    return dropped_;
  }
  std::future<void> released() { return released_.get_future(); }
  int waits() {
    const std::lock_guard lock(mutex_);
    return waits_;
  }

 private:
  const std::size_t bound_;
  std::mutex mutex_;
  std::condition_variable typed_changed_;
  std::size_t room_;
  bool room_given_ = false;
  std::string output_;
  std::uint64_t dropped_ = 0;
  std::string typed_;
  std::optional<std::string> ended_;
  std::function<void()> wake_;
  int waits_ = 0;
  std::promise<void> released_;
};

// A server whose /console upgrades to the channel the test gives it; anything else is 200 "ok".
class ChannelServer {
 public:
  explicit ChannelServer(ServerLimits limits = {}) {
    ServerOptions options;
    ListenAddress address;
    address.kind = ListenAddress::Kind::unix_socket;
    address.socket_path = dir_.path() / "api.sock";
    options.listen = {address};
    options.socket_group = "";
    options.limits = limits;
    auto server = HttpServer::start(
        options, [this](const HttpRequest& request) { return handle(request); },
        [this](const RequestRecord& record) {
          const std::lock_guard lock(mutex_);
          statuses_.push_back(record.status);
        });
    REQUIRE_MESSAGE(server.ok(), server.error().message);
    server_ = std::move(server).value();
  }

  std::shared_ptr<TestChannel> offer(std::size_t bound = 1 << 20, std::size_t room = SIZE_MAX) {
    auto channel = std::make_shared<TestChannel>(bound, room);
    const std::lock_guard lock(mutex_);
    next_ = channel;
    return channel;
  }
  fs::path socket() const { return dir_.path() / "api.sock"; }
  HttpServer& server() { return *server_; }
  std::vector<unsigned> statuses() {
    const std::lock_guard lock(mutex_);
    return statuses_;
  }

 private:
  HttpResponse handle(const HttpRequest& request) {
    HttpResponse response;
    if (request.path != "/console") {
      response.content_type = "text/plain";
      response.body = "ok";
      return response;
    }
    const std::lock_guard lock(mutex_);
    response.status = 101;
    response.content_type.clear();
    response.channel = std::exchange(next_, nullptr);
    return response;
  }

  TempDir dir_;
  std::mutex mutex_;
  std::shared_ptr<TestChannel> next_;
  std::vector<unsigned> statuses_;
  std::unique_ptr<HttpServer> server_;
};

using Socket = asio::local::stream_protocol::socket;

// Beast's client on a unix socket whose reads give up after kWait (SO_RCVTIMEO), so a test that
// waits for what never comes fails instead of hanging.
struct Client {
  asio::io_context io;
  websocket::stream<Socket> ws{io};
  websocket::response_type answer;
  boost::system::error_code handshake;

  explicit Client(const fs::path& socket) {
    ws.next_layer().connect(asio::local::stream_protocol::endpoint(socket.string()));
    const timeval timeout{std::chrono::duration_cast<std::chrono::seconds>(kWait).count(), 0};
    ::setsockopt(ws.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ws.handshake(answer, "localhost", "/console", handshake);
  }
  // The next message, or the error that came instead.
  std::string read(boost::system::error_code& error) {
    boost::beast::flat_buffer buffer;
    ws.read(buffer, error);
    return boost::beast::buffers_to_string(buffer.data());
  }
};

TEST_CASE("a WebSocket carries a channel both ways and closes with the channel's reason") {
  ChannelServer server;
  auto channel = server.offer();
  Client client(server.socket());
  REQUIRE_MESSAGE(!client.handshake, client.handshake.message());
  CHECK(client.answer.result_int() == 101);
  CHECK(server.statuses() == std::vector<unsigned>{101});  // observed before the handshake's answer went out
  CHECK(server.server().connection_stats().event_streams == 1);

  client.ws.binary(true);
  client.ws.write(asio::buffer(std::string("echo hi\r")));
  CHECK(channel->wait_typed("echo hi\r"));
  channel->write("echo hi\r\nhi\r\n/ # ");
  boost::system::error_code error;
  CHECK(client.read(error) == "echo hi\r\nhi\r\n/ # ");
  REQUIRE_FALSE(error);
  CHECK(client.ws.got_binary());

  channel->write("last words");
  channel->end("the guest stopped");
  CHECK(client.read(error) == "last words");  // what the channel had is sent before the close
  client.read(error);
  CHECK(error == websocket::error::closed);
  CHECK(std::string(client.ws.reason().reason.c_str()) == "the guest stopped");
  auto released = channel->released();
  channel.reset();
  CHECK(released.wait_for(kWait) == std::future_status::ready);
}

TEST_CASE("what the channel has no room for waits, unread, until the channel wakes the server") {
  ChannelServer server;
  auto channel = server.offer(1 << 20, 4);
  Client client(server.socket());
  REQUIRE_MESSAGE(!client.handshake, client.handshake.message());
  client.ws.binary(true);
  client.ws.write(asio::buffer(std::string("abcdefgh")));
  client.ws.write(asio::buffer(std::string("ij")));
  CHECK(channel->wait_typed("abcd"));
  CHECK(channel->typed() == "abcd");  // the rest, and the next message, wait in the server
  channel->make_room(100);
  CHECK(channel->wait_typed("abcdefghij"));  // in order, nothing lost
}

TEST_CASE("input the channel never took is dropped when the channel ends, and the close follows at once") {
  ChannelServer server;
  auto channel = server.offer(1 << 20, 0);  // takes nothing
  Client client(server.socket());
  REQUIRE_MESSAGE(!client.handshake, client.handshake.message());
  client.ws.binary(true);
  client.ws.write(asio::buffer(std::string("typed into a guest that reads nothing")));
  channel->end("the guest stopped");
  boost::system::error_code error;
  client.read(error);
  CHECK(error == websocket::error::closed);
  CHECK(std::string(client.ws.reason().reason.c_str()) == "the guest stopped");
  CHECK(channel->typed().empty());
  // The server asked the ended channel to wake it a few times at most, never in a loop.
  CHECK(channel->waits() < 10);
}

TEST_CASE("a client that stops reading is disconnected, and the channel never waits for it") {
  ServerLimits limits;
  limits.event_send_buffer = 4096;
  limits.request_timeout = std::chrono::milliseconds(300);
  ChannelServer server(limits);
  auto channel = server.offer(64 << 10);
  auto released = channel->released();
  Client client(server.socket());
  REQUIRE_MESSAGE(!client.handshake, client.handshake.message());
  // The far side writes 8 MiB while the client reads nothing: each write returns at once (the
  // channel drops its oldest), and the server gives up on the client.
  const std::string chunk(16 << 10, 'x');
  for (int i = 0; i < 512; ++i) channel->write(chunk);
  CHECK(channel->dropped() > 0);
  channel.reset();
  CHECK(released.wait_for(kWait) == std::future_status::ready);
  CHECK(server.server().connection_stats().event_streams == 0);
  // The server serves everyone else meanwhile.
  auto plain = testing::connect_unix(server.socket());
  REQUIRE(plain);
  const auto answer = plain->request(testing::http::verb::get, "/x");
  REQUIRE(answer);
  CHECK(answer->result_int() == 200);
}

TEST_CASE("a client that vanishes without a close lets go of the channel") {
  ChannelServer server;
  auto channel = server.offer();
  auto released = channel->released();
  {
    Client client(server.socket());
    REQUIRE_MESSAGE(!client.handshake, client.handshake.message());
    client.ws.next_layer().close();  // no close frame: the process died, say
  }
  channel.reset();
  CHECK(released.wait_for(kWait) == std::future_status::ready);
  CHECK(server.server().connection_stats().open == 0);
}

TEST_CASE("channels count against max_event_streams: one past it is 503") {
  ServerLimits limits;
  limits.max_event_streams = 1;
  ChannelServer server(limits);
  auto first_channel = server.offer();
  Client first(server.socket());
  REQUIRE_MESSAGE(!first.handshake, first.handshake.message());
  server.offer();
  Client second(server.socket());
  CHECK(second.handshake == websocket::error::upgrade_declined);
  CHECK(second.answer.result_int() == 503);
}

}  // namespace
}  // namespace hostagent::api
