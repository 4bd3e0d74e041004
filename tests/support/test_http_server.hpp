// A tiny HTTP/1.1 server for the client's tests (Boost.Beast, blocking, a thread per connection):
// it answers what the test's handler says, streams server-sent events, and can drop a keep-alive
// connection the way a server's idle timeout does, so the client's handling of each is observable.
#pragma once

#include <atomic>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hostagent::testing {

struct TestReply {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> event_frames;  // set: a chunked text/event-stream of these, then the end
  bool close_after = false;               // close the connection after this reply, without saying so
};

using TestRequest = boost::beast::http::request<boost::beast::http::string_body>;
using TestHandler = std::function<TestReply(const TestRequest&)>;

class TestServer {
 public:
  // Listens on a unix socket at `path`, or on 127.0.0.1 at an ephemeral port.
  static std::unique_ptr<TestServer> unix_socket(const std::filesystem::path& path, TestHandler handler);
  static std::unique_ptr<TestServer> tcp(TestHandler handler);
  virtual ~TestServer() = default;

  virtual std::string url() const = 0;  // unix:PATH or http://127.0.0.1:PORT
  int connections() const { return connections_; }

 protected:
  std::atomic<int> connections_{0};
};

}  // namespace hostagent::testing
