// The client tests' server: blocking Beast, one thread to accept and one per connection.
#include "test_http_server.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace hostagent::testing {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;

template <class Protocol>
class Server final : public TestServer {
 public:
  Server(typename Protocol::endpoint endpoint, TestHandler handler, std::string url)
      : acceptor_(io_, endpoint), handler_(std::move(handler)), url_(std::move(url)) {
    if constexpr (std::is_same_v<Protocol, net::ip::tcp>) {
      url_ = "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
    }
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~Server() override {
    stopping_ = true;
    {  // wake accept() with a connection of our own
      typename Protocol::socket wake(io_);
      boost::system::error_code ignored;
      wake.connect(acceptor_.local_endpoint(), ignored);
    }
    accept_thread_.join();
    {
      std::lock_guard lock(mutex_);
      for (auto& socket : sockets_) {
        boost::system::error_code ignored;
        socket->shutdown(net::socket_base::shutdown_both, ignored);
      }
    }
    for (auto& thread : threads_) thread.join();
  }
  std::string url() const override { return url_; }

 private:
  void accept_loop() {
    for (;;) {
      auto socket = std::make_shared<typename Protocol::socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*socket, ec);
      if (ec || stopping_) return;
      ++connections_;
      std::lock_guard lock(mutex_);
      sockets_.push_back(socket);
      threads_.emplace_back([this, socket] { serve(*socket); });
    }
  }

  void serve(typename Protocol::socket& socket) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      TestRequest request;
      boost::system::error_code ec;
      http::read(socket, buffer, request, ec);
      if (ec) return;
      const auto reply = handler_(request);
      if (!reply.event_frames.empty()) return stream_events(socket, reply);
      http::response<http::string_body> response{static_cast<http::status>(reply.status), 11};
      response.set(http::field::content_type, reply.content_type);
      for (const auto& [name, value] : reply.headers) response.set(name, value);
      response.body() = reply.body;
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      http::write(socket, response, ec);
      if (ec || reply.close_after || !request.keep_alive()) {
        socket.shutdown(net::socket_base::shutdown_both, ec);
        return;
      }
    }
  }

  static void stream_events(typename Protocol::socket& socket, const TestReply& reply) {
    boost::system::error_code ec;
    const std::string header =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    net::write(socket, net::buffer(header), ec);
    for (const auto& frame : reply.event_frames) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", frame.size());
      net::write(socket, net::buffer(std::string(size) + frame + "\r\n"), ec);
    }
    net::write(socket, net::buffer(std::string("0\r\n\r\n")), ec);
    socket.shutdown(net::socket_base::shutdown_both, ec);
  }

  net::io_context io_;
  typename Protocol::acceptor acceptor_;
  TestHandler handler_;
  std::string url_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::vector<std::shared_ptr<typename Protocol::socket>> sockets_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
};

}  // namespace

std::unique_ptr<TestServer> TestServer::unix_socket(const std::filesystem::path& path, TestHandler handler) {
  return std::make_unique<Server<net::local::stream_protocol>>(net::local::stream_protocol::endpoint(path.string()),
                                                               std::move(handler), "unix:" + path.string());
}

std::unique_ptr<TestServer> TestServer::tcp(TestHandler handler) {
  return std::make_unique<Server<net::ip::tcp>>(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0),
                                                std::move(handler), "");
}

}  // namespace hostagent::testing
