// api/api_client: requests over one keep-alive connection, and the event stream on one of its own.
#include "hostagent/api/api_client.hpp"

#include <boost/beast/version.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "hostagent/common/text_file.hpp"
#include "transport.hpp"

namespace hostagent::api {
namespace {

namespace beast = boost::beast;
using boost::system::error_code;
using detail::ClientEndpoint;
using detail::StreamResponseParser;
using detail::StringResponseParser;
using detail::Transport;

constexpr std::uint64_t kMaxBody = 64ULL << 20;  // a host document of a large machine is a few MiB
constexpr std::uint32_t kMaxHeader = 64U << 10;

std::string media_type(const std::string& content_type) {
  return content_type.substr(0, content_type.find(';'));
}

// A failure on a reused connection before any answer arrived: the server closed it while idle
// (its idle timeout), so the request never reached it and may be sent again on a fresh one.
bool stale_connection(const error_code& ec) {
  return ec == beast::http::error::end_of_stream || ec == boost::asio::error::eof ||
         ec == boost::asio::error::connection_reset || ec == boost::asio::error::broken_pipe ||
         ec == boost::asio::ssl::error::stream_truncated;
}

Result<boost::json::value> parse_json_body(const ApiResponse& response, const std::string& what) {
  boost::system::error_code ec;
  auto value = boost::json::parse(response.body, ec);
  if (ec) {
    return Error{ErrorCode::parse_error, what + ": the answer is not JSON (" + ec.message() + ", content type '" +
                                             response.content_type + "'); is the URL the server's?"};
  }
  return value;
}

class Client final : public ApiClient {
 public:
  Client(ClientOptions options, ClientEndpoint endpoint, std::unique_ptr<boost::asio::ssl::context> tls)
      : options_(std::move(options)), endpoint_(std::move(endpoint)), tls_(std::move(tls)) {}

  const std::string& url() const override { return options_.url; }

  Result<ApiResponse> request(const std::string& method, const std::string& target, const std::string& body,
                              const std::string& content_type) override {
    HA_TRY(auto message, make_request(method, target, body, content_type));
    for (int attempt = 0;; ++attempt) {
      const bool reused = transport_ != nullptr;
      if (!reused) {
        HA_TRY(transport_, connect());
      }
      bool answered = false;
      auto response = exchange(message, target, answered);
      if (response.ok() || !reused || answered || attempt > 0 || !stale_connection(last_error_)) return response;
      transport_.reset();
    }
  }

  Status read_events(const std::string& target, const std::function<bool(const ServerEvent&)>& on_event,
                     std::chrono::milliseconds idle_timeout) override {
    HA_TRY(auto message, make_request("GET", target, "", ""));
    message.set(beast::http::field::accept, "text/event-stream");
    HA_TRY(auto stream, connect());
    const std::string what = "GET " + target + " at " + options_.url;
    if (auto ec = stream->write(message, options_.read_timeout)) return transfer_error(what, ec);
    beast::flat_buffer buffer;
    StreamResponseParser parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser.header_limit(kMaxHeader);
    if (auto ec = stream->read_header(buffer, parser, options_.read_timeout)) return transfer_error(what, ec);
    if (parser.get().result_int() != 200) return refused_stream(*stream, buffer, parser, what);
    std::string pending;
    std::array<char, 8192> chunk{};
    while (!parser.is_done()) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      if (auto ec = stream->read_some(buffer, parser, idle_timeout)) return transfer_error(what, ec);
      pending.append(chunk.data(), chunk.size() - parser.get().body().size);
      for (const auto& event : take_server_events(pending)) {
        if (!on_event(event)) return ok_status();
      }
    }
    return Error{ErrorCode::unavailable,
                 what + ": the server ended the event stream (is " + options_.server_name + " stopping?)"};
  }

  Result<std::string> attach(const std::string& target, const ConsoleIo& io) override {
    HA_TRY_STATUS(check_target(target));
    HA_TRY(auto stream, connect());
    const detail::WebSocketRequest request{host_header(), target, sender_headers(), options_.read_timeout, io};
    const std::string what = "the WebSocket at " + target + " of " + options_.url;
    HA_TRY(auto outcome, stream->run_websocket(request, what));
    if (outcome.refused_status == 0) return outcome.close_reason;
    if (const auto problem = parse_problem(outcome.refused_body)) return problem_error(*problem);
    return Error{ErrorCode::io_error, what + ": HTTP " + std::to_string(outcome.refused_status)};
  }

 private:
  static Status check_target(const std::string& target) {
    if (target.empty() || target.front() != '/') {
      return Error{ErrorCode::invalid_argument, "request target '" + target + "' must start with '/'"};
    }
    return ok_status();
  }

  // Who sends, on every request and handshake: the client, its token, another service's headers.
  std::vector<std::pair<std::string, std::string>> sender_headers() const {
    std::vector<std::pair<std::string, std::string>> headers{{"User-Agent", "hostagent-api-client"}};
    if (!options_.token.empty()) headers.emplace_back("Authorization", "Bearer " + options_.token);
    headers.insert(headers.end(), options_.headers.begin(), options_.headers.end());
    return headers;
  }

  Result<beast::http::request<beast::http::string_body>> make_request(const std::string& method,
                                                                      const std::string& target,
                                                                      const std::string& body,
                                                                      const std::string& content_type) const {
    const auto verb = beast::http::string_to_verb(method);
    if (verb == beast::http::verb::unknown) {
      return Error{ErrorCode::invalid_argument, "HTTP method '" + method + "' is not one Beast knows"};
    }
    HA_TRY_STATUS(check_target(target));
    beast::http::request<beast::http::string_body> message{verb, target, 11};
    message.set(beast::http::field::host, host_header());
    for (const auto& [name, value] : sender_headers()) message.set(name, value);
    if (!body.empty() || verb == beast::http::verb::post) {
      message.set(beast::http::field::content_type, content_type);
      message.body() = body;
    }
    message.keep_alive(true);
    message.prepare_payload();
    return message;
  }

  std::string host_header() const {
    if (endpoint_.kind == ClientEndpoint::Kind::unix_socket) return "localhost";
    const bool ipv6 = endpoint_.host.find(':') != std::string::npos;
    return (ipv6 ? "[" + endpoint_.host + "]" : endpoint_.host) + ":" + std::to_string(endpoint_.port);
  }

  Result<std::unique_ptr<Transport>> connect() {
    detail::ConnectSettings settings{&endpoint_, &options_.url, tls_.get(), options_.connect_timeout,
                                     &options_.server_name};
    return detail::connect(io_, settings);
  }

  // Sends the request on transport_ and reads the answer; `answered` says whether any of it came.
  Result<ApiResponse> exchange(beast::http::request<beast::http::string_body>& message, const std::string& target,
                               bool& answered) {
    const std::string what = std::string(message.method_string()) + " " + target + " at " + options_.url;
    last_error_ = transport_->write(message, options_.read_timeout);
    if (last_error_) return drop(what);
    beast::flat_buffer buffer;
    StringResponseParser parser;
    parser.body_limit(kMaxBody);
    parser.header_limit(kMaxHeader);
    last_error_ = transport_->read(buffer, parser, options_.read_timeout);
    answered = parser.got_some();
    if (last_error_) return drop(what);
    auto response = parser.release();
    if (!response.keep_alive()) transport_.reset();
    ApiResponse out;
    out.status = response.result_int();
    for (const auto& field : response) {
      std::string name(field.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(field.value());
    }
    out.content_type = media_type(out.headers["content-type"]);
    out.body = std::move(response.body());
    return out;
  }

  Error drop(const std::string& what) {
    transport_.reset();
    return transfer_error(what, last_error_);
  }

  Error transfer_error(const std::string& what, const error_code& ec) const {
    if (ec == beast::error::timeout) {
      return {ErrorCode::io_error, what + ": no answer within the timeout (--timeout); the daemon may be busy"};
    }
    if (stale_connection(ec)) {
      return {ErrorCode::unavailable, what + ": the server closed the connection (" + ec.message() + "); is " +
                                          options_.server_name + " restarting?"};
    }
    return {ErrorCode::io_error, what + ": " + ec.message()};
  }

  // The stream was refused (401, 404, 503...): its body is the problem to report.
  Error refused_stream(Transport& stream, beast::flat_buffer& buffer, StreamResponseParser& parser,
                       const std::string& what) {
    std::string body;
    std::array<char, 4096> chunk{};
    while (!parser.is_done() && body.size() < kMaxHeader) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      if (stream.read_some(buffer, parser, options_.read_timeout)) break;
      body.append(chunk.data(), chunk.size() - parser.get().body().size);
    }
    if (const auto problem = parse_problem(body)) return problem_error(*problem);
    return {ErrorCode::io_error, what + ": HTTP " + std::to_string(parser.get().result_int())};
  }

  ClientOptions options_;
  ClientEndpoint endpoint_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  boost::asio::io_context io_;
  std::unique_ptr<Transport> transport_;
  error_code last_error_;
};

Result<std::unique_ptr<boost::asio::ssl::context>> make_tls(const ClientOptions& options) {
  namespace ssl = boost::asio::ssl;
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  context->set_verify_mode(ssl::verify_peer);
  error_code ec;
  const auto fail = [&ec](const std::string& what, const std::string& option) {
    return Error{ErrorCode::invalid_argument, what + ": " + ec.message() + " (" + option + ")"};
  };
  // Each file read as every file someone names is read (common/named_file), never by OpenSSL,
  // which would open a FIFO and wait on it.
  const auto pem = [](const std::string& file, const std::string& option) -> Result<std::string> {
    auto text = read_text_file(file);
    if (!text.ok()) return Error{ErrorCode::invalid_argument, option + " " + file + ": " + text.error().message};
    return text;
  };
  if (options.ca_file.empty()) {
    if (context->set_default_verify_paths(ec)) return fail("the system's CA certificates", "--ca");
  } else {
    HA_TRY(const auto authorities, pem(options.ca_file, "--ca"));
    if (context->add_certificate_authority(boost::asio::buffer(authorities), ec)) {
      return fail("read CA certificate " + options.ca_file, "--ca");
    }
  }
  if (options.certificate_file.empty() != options.key_file.empty()) {
    return Error{ErrorCode::invalid_argument, "a client certificate needs both --cert and --key"};
  }
  if (!options.certificate_file.empty()) {
    HA_TRY(const auto certificate, pem(options.certificate_file, "--cert"));
    if (context->use_certificate_chain(boost::asio::buffer(certificate), ec)) {
      return fail("read client certificate " + options.certificate_file, "--cert");
    }
    HA_TRY(const auto key, pem(options.key_file, "--key"));
    if (context->use_private_key(boost::asio::buffer(key), ssl::context::pem, ec)) {
      return fail("read client key " + options.key_file + " (does it match the certificate?)", "--key");
    }
  }
  return context;
}

}  // namespace

Result<std::unique_ptr<ApiClient>> ApiClient::make(ClientOptions options) {
  HA_TRY(auto endpoint, detail::parse_client_url(options.url));
  std::unique_ptr<boost::asio::ssl::context> tls;
  if (endpoint.kind == ClientEndpoint::Kind::https) {
    HA_TRY(tls, make_tls(options));
  } else if (!options.certificate_file.empty() || !options.key_file.empty() || !options.ca_file.empty()) {
    return Error{ErrorCode::invalid_argument,
                 "--cert, --key and --ca are for https:// URLs; '" + options.url + "' does not use TLS"};
  }
  // A bearer token in clear text is anyone's on the way: http:// carries one to this host alone.
  if (endpoint.kind == ClientEndpoint::Kind::http && !options.token.empty() &&
      !detail::is_loopback_host(endpoint.host)) {
    return Error{ErrorCode::invalid_argument, "the bearer token would go to " + endpoint.host +
                                                  " in clear text (http://): use https:// for a host that is not "
                                                  "this one; http:// with a token is for loopback only"};
  }
  return std::unique_ptr<ApiClient>(std::make_unique<Client>(std::move(options), std::move(endpoint), std::move(tls)));
}

Result<ApiResponse> ApiClient::call(const std::string& method, const std::string& target, const std::string& body,
                                    const std::string& content_type) {
  HA_TRY(auto response, request(method, target, body, content_type));
  if (response.status >= 200 && response.status < 300) return response;
  if (const auto problem = parse_problem(response.body)) return problem_error(*problem);
  const auto code = response.status == 404   ? ErrorCode::not_found
                    : response.status >= 500 ? ErrorCode::internal
                                             : ErrorCode::invalid_argument;
  return Error{code, method + " " + target + " at " + url() + ": HTTP " + std::to_string(response.status) +
                         (response.body.empty() ? "" : ": " + response.body.substr(0, 200))};
}

Result<boost::json::value> ApiClient::get_json(const std::string& target) {
  HA_TRY(auto response, call("GET", target));
  return parse_json_body(response, "GET " + target);
}

Result<boost::json::value> ApiClient::send_json(const std::string& method, const std::string& target,
                                                const boost::json::value& body) {
  HA_TRY(auto response, call(method, target, boost::json::serialize(body)));
  return parse_json_body(response, method + " " + target);
}

}  // namespace hostagent::api
