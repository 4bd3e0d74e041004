// The HTTP server over real sockets: unix sockets (peer credentials, mode, stale files), TCP with
// bearer tokens, mutual TLS, the limits, keep-alive, event streams, and handlers that block.
#include <doctest/doctest.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include <boost/json.hpp>

#include "hostagent/common/listen_address.hpp"
#include "test_fixture.hpp"
#include "test_pki.hpp"
#include "test_support.hpp"

namespace hostagent::api {
namespace {

namespace fs = std::filesystem;
using hostagent::testing::TempDir;
using testing::connect_tcp;
using testing::connect_unix;
using testing::Harness;
using testing::make_pki;
using testing::Response;
using testing::http::verb;

ListenAddress unix_address(const fs::path& path) {
  ListenAddress address;
  address.kind = ListenAddress::Kind::unix_socket;
  address.socket_path = path;
  return address;
}

ListenAddress tcp_address(const std::string& host) {
  ListenAddress address;
  address.kind = ListenAddress::Kind::tcp;
  address.host = host;
  address.port = 0;
  return address;
}

ServerOptions unix_options(const fs::path& path) {
  ServerOptions options;
  options.listen = {unix_address(path)};
  options.socket_group = "";
  return options;
}

ServerOptions token_options() {
  ServerOptions options;
  options.listen = {tcp_address("127.0.0.1")};
  options.operator_token = "operator-secret";
  options.reader_token = "reader-secret";
  return options;
}

uint16_t tcp_port(const HttpServer& server) {
  for (const auto& endpoint : server.endpoints()) {
    if (endpoint.kind == ListenAddress::Kind::tcp) return endpoint.port;
  }
  return 0;
}

// The error's message, for REQUIRE_MESSAGE (which doctest may evaluate on success too, with -s).
template <class T>
std::string failure(const Result<T>& result) {
  return result.ok() ? std::string() : result.error().message;
}

std::string problem_code(const Response& response) {
  return std::string(boost::json::parse(response.body()).as_object().at("code").as_string());
}

std::vector<std::pair<std::string, std::string>> bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

// ---- unix sockets ------------------------------------------------------------------------------

TEST_CASE("a unix socket peer is an operator known by its uid (SO_PEERCRED)") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  REQUIRE(client);
  auto response = client->request(verb::post, "/v1/vms/a%20b?state=running");
  REQUIRE(response);
  CHECK(response->result_int() == 200);
  CHECK(response->body() == "uid:" + std::to_string(::getuid()) + " operator POST /v1/vms/a b");
  REQUIRE(harness.wait_seen(1));
  CHECK(harness.seen()[0].remote == "unix");
  CHECK(harness.seen()[0].status == 200);
}

TEST_CASE("a unix socket is made with the configured mode and group and removed at stop") {
  TempDir dir;
  const fs::path path = dir.path() / "api.sock";
  ServerOptions options = unix_options(path);
  options.socket_mode = 0600;
  // A group other than ours, when the system has one: the chown has to have happened.
  const group* other = ::getgrnam("daemon");
  const std::optional<gid_t> gid = other != nullptr ? std::optional<gid_t>(other->gr_gid) : std::nullopt;
  if (gid) options.socket_group = "daemon";
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK(S_ISSOCK(info.st_mode));
  CHECK((info.st_mode & 07777) == 0600);
  if (gid) CHECK(info.st_gid == *gid);
  (*server)->stop();
  (*server)->stop();  // idempotent
  CHECK_FALSE(fs::exists(fs::symlink_status(path)));
}

TEST_CASE("a missing socket group is a warning, not an error") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.socket_group = "hostagent-no-such-group-xyz";
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  CHECK(connect_unix(dir.path() / "api.sock"));
}

// A socket file nobody listens on, as a crashed daemon leaves it.
void make_stale_socket(const fs::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0);
  ::close(fd);
}

TEST_CASE("a stale unix socket file is replaced and a live one is refused, naming it") {
  TempDir dir;
  const fs::path path = dir.path() / "api.sock";
  make_stale_socket(path);
  REQUIRE(fs::is_socket(path));
  Harness harness;
  auto server = harness.start(unix_options(path));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto response = connect_unix(path)->request(verb::get, "/live");
  REQUIRE(response);
  CHECK(response->result_int() == 200);

  Harness second;
  auto refused = second.start(unix_options(path));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK(refused.error().message.find(path.string()) != std::string::npos);
  // The first server still owns its socket and serves.
  auto again = connect_unix(path)->request(verb::get, "/live");
  REQUIRE(again);
  CHECK(again->result_int() == 200);
}

TEST_CASE("a path that is not a socket is refused and left alone") {
  TempDir dir;
  const fs::path path = dir.path() / "api.sock";
  std::ofstream(path) << "not a socket";
  Harness harness;
  auto refused = harness.start(unix_options(path));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find(path.string()) != std::string::npos);
  CHECK(hostagent::testing::read_text_file(path) == "not a socket");
}

// ---- TCP with bearer tokens --------------------------------------------------------------------

TEST_CASE("tcp with bearer tokens: operator, reader, and no or a wrong token") {
  Harness harness;
  auto server = harness.start(token_options());
  REQUIRE_MESSAGE(server.ok(), failure(server));
  const uint16_t port = tcp_port(**server);
  REQUIRE(port != 0);

  auto client = connect_tcp("127.0.0.1", port);
  REQUIRE(client);
  auto post = client->request(verb::post, "/v1/vms", "{}", bearer("operator-secret"));
  REQUIRE(post);
  CHECK(post->result_int() == 200);
  CHECK(post->body() == "token:operator operator POST /v1/vms");

  auto read = client->request(verb::get, "/v1/vms", "", {{"Authorization", "bearer reader-secret"}});
  REQUIRE(read);
  CHECK(read->result_int() == 200);
  CHECK(read->body() == "token:reader reader GET /v1/vms");

  auto forbidden = client->request(verb::delete_, "/v1/vms/x", "", bearer("reader-secret"));
  REQUIRE(forbidden);
  CHECK(forbidden->result_int() == 403);
  CHECK((*forbidden)[testing::http::field::content_type] == "application/problem+json");
  CHECK(problem_code(*forbidden) == "forbidden");

  auto missing = client->request(verb::get, "/v1/vms");
  REQUIRE(missing);
  CHECK(missing->result_int() == 401);
  CHECK((*missing)[testing::http::field::www_authenticate].starts_with("Bearer"));
  CHECK(problem_code(*missing) == "unauthenticated");

  auto wrong = client->request(verb::get, "/v1/vms", "", bearer("operator-secreT"));
  REQUIRE(wrong);
  CHECK(wrong->result_int() == 401);
  auto longer = client->request(verb::get, "/v1/vms", "", bearer("operator-secret2"));
  REQUIRE(longer);
  CHECK(longer->result_int() == 401);
  // Only the two authorised requests reached the handler.
  CHECK(harness.handled().size() == 2);
  // Every request is observed (for the metrics); those with a valid token as authenticated (for the
  // audit log), the reader's refused DELETE among them, and the three 401s not.
  REQUIRE(harness.wait_seen(6));
  std::vector<std::pair<unsigned, bool>> observed;
  for (const auto& seen : harness.seen()) observed.emplace_back(seen.status, seen.authenticated);
  CHECK(observed == std::vector<std::pair<unsigned, bool>>{
                        {200, true}, {200, true}, {403, true}, {401, false}, {401, false}, {401, false}});
}

TEST_CASE("tcp without tls or a token is refused at start") {
  ServerOptions options;
  options.listen = {tcp_address("127.0.0.1")};
  Harness harness;
  auto refused = harness.start(options);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(refused.error().message.find("tcp://127.0.0.1:0") != std::string::npos);

  options.listen = {tcp_address("::1")};  // named as the configuration writes it, in brackets
  auto refused_v6 = harness.start(options);
  REQUIRE_FALSE(refused_v6.ok());
  CHECK(refused_v6.error().message.find("api.listen tcp://[::1]:0:") != std::string::npos);
}

TEST_CASE("tcp on the ipv6 loopback reports the port it bound") {
  ServerOptions options = token_options();
  options.listen = {tcp_address("::1")};
  Harness harness;
  auto server = harness.start(options);
  if (!server) {
    hostagent::testing::skip("no IPv6 loopback here: " + server.error().message);
    return;
  }
  const uint16_t port = tcp_port(**server);
  REQUIRE(port != 0);
  CHECK((*server)->endpoints()[0].host == "::1");
  auto response = connect_tcp("::1", port)->request(verb::get, "/v6", "", bearer("reader-secret"));
  REQUIRE(response);
  CHECK(response->result_int() == 200);
  REQUIRE(harness.wait_seen(1));
  CHECK(harness.seen()[0].remote.starts_with("[::1]:"));
}

// ---- mutual TLS --------------------------------------------------------------------------------

TEST_CASE("mutual tls: the certificate's CN decides the role, and no or a foreign certificate is refused") {
  TempDir dir;
  const auto pki = make_pki(dir.path());
  if (!pki) return;
  ServerOptions options;
  options.listen = {tcp_address("127.0.0.1")};
  options.tls_certificate_file = pki->server_certificate.string();
  options.tls_key_file = pki->server_key.string();
  options.tls_client_ca_file = pki->ca.string();
  options.operator_common_names = {"control-plane"};
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  const uint16_t port = tcp_port(**server);

  auto as_operator = testing::connect_tls(port, pki->ca, pki->operator_certificate, pki->operator_key);
  REQUIRE(as_operator.handshake_ok);
  auto created = as_operator.client->request(verb::post, "/v1/vms", "{}");
  REQUIRE(created);
  CHECK(created->result_int() == 200);
  CHECK(created->body() == "cert:CN=control-plane operator POST /v1/vms");

  auto as_reader = testing::connect_tls(port, pki->ca, pki->reader_certificate, pki->reader_key);
  REQUIRE(as_reader.handshake_ok);
  auto read = as_reader.client->request(verb::get, "/v1/host");
  REQUIRE(read);
  CHECK(read->body() == "cert:CN=dashboard reader GET /v1/host");
  auto forbidden = as_reader.client->request(verb::post, "/v1/vms", "{}");
  REQUIRE(forbidden);
  CHECK(forbidden->result_int() == 403);

  // TLS 1.3 lets the client finish its handshake before the server has checked its certificate:
  // the refusal shows either there or as a request that gets no answer.
  auto anonymous = testing::connect_tls(port, pki->ca, {}, {});
  CHECK_FALSE((anonymous.handshake_ok && anonymous.client->request(verb::get, "/v1/host")));
  auto foreign = testing::connect_tls(port, pki->ca, pki->foreign_certificate, pki->foreign_key);
  CHECK_FALSE((foreign.handshake_ok && foreign.client->request(verb::get, "/v1/host")));
  CHECK(harness.handled().size() == 2);
}

TEST_CASE("a tls key that is missing is refused at start, naming the file") {
  ServerOptions options;
  options.listen = {tcp_address("127.0.0.1")};
  options.tls_certificate_file = "/nonexistent/server.crt";
  options.tls_key_file = "/nonexistent/server.key";
  options.tls_client_ca_file = "/nonexistent/ca.crt";
  Harness harness;
  auto refused = harness.start(options);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("/nonexistent/server.crt") != std::string::npos);
}

// ---- limits ------------------------------------------------------------------------------------

TEST_CASE("a body above the limit is 413 and never reaches the handler") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.max_body_bytes = 1024;
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  auto small = client->request(verb::post, "/small", std::string(1024, 'x'));
  REQUIRE(small);
  CHECK(small->result_int() == 200);
  auto large = client->request(verb::post, "/large", std::string(4096, 'x'));
  REQUIRE(large);
  CHECK(large->result_int() == 413);
  CHECK(problem_code(*large) == "payload_too_large");
  CHECK(harness.handled() == std::vector<std::string>{"/small"});
  CHECK(client->closed_by_server());
}

TEST_CASE("headers above the limit are 431") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.max_header_bytes = 1024;
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto response =
      connect_unix(dir.path() / "api.sock")->request(verb::get, "/x", "", {{"X-Big", std::string(2000, 'a')}});
  REQUIRE(response);
  CHECK(response->result_int() == 431);
  CHECK(problem_code(*response) == "header_too_large");
  CHECK(harness.handled().empty());
}

TEST_CASE("malformed requests and bad targets are 400 problems") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto bad_target = connect_unix(dir.path() / "api.sock")->request(verb::get, "/v1/vms/%zz");
  REQUIRE(bad_target);
  CHECK(bad_target->result_int() == 400);
  CHECK(problem_code(*bad_target) == "invalid_argument");
  auto nul = connect_unix(dir.path() / "api.sock")->request(verb::get, "/v1/vms/a%00b");
  REQUIRE(nul);
  CHECK(nul->result_int() == 400);

  auto garbage = connect_unix(dir.path() / "api.sock");
  REQUIRE(garbage->send("GET /x HTTP/1.1\r\nBad Header Line\r\n\r\n"));
  auto response = garbage->read();
  REQUIRE(response);
  CHECK(response->result_int() == 400);
  CHECK(harness.handled().empty());
}

TEST_CASE("a request whose framing is not chunked is refused and closed: its body never runs as a request") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  for (const std::string coding : {"chunked, identity", "xchunked", "gzip"}) {
    CAPTURE(coding);
    auto client = connect_unix(dir.path() / "api.sock");
    REQUIRE(client->send("POST /start HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding +
                         "\r\n\r\nDELETE /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto response = client->read();
    REQUIRE(response);
    CHECK(response->result_int() == 400);
    CHECK(client->closed_by_server());
  }
  auto encoded = connect_unix(dir.path() / "api.sock");
  REQUIRE(encoded->send("POST /gz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"));
  auto response = encoded->read();
  REQUIRE(response);
  CHECK(response->result_int() == 501);
  CHECK(problem_code(*response) == "not_implemented");
  CHECK(encoded->closed_by_server());
  CHECK(harness.handled().empty());
}

TEST_CASE("a folded header line is 400 and closed over a socket too, however the bytes arrive") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  // The fold arrives in a write of its own, after the line it continues.
  REQUIRE(client->send("GET /folded HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.0.0.1\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(client->send(" 10.0.0.2\r\n\r\n"));
  const auto answer = client->read();
  REQUIRE(answer);
  CHECK(answer->result_int() == 400);
  CHECK(boost::json::parse(answer->body()).at("detail").as_string().find("obs-fold") != std::string::npos);
  CHECK(client->closed_by_server());
  CHECK(harness.handled().empty());
}

TEST_CASE("a request without Host is 400 over a socket") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  REQUIRE(client->send("GET /nohost HTTP/1.1\r\n\r\n"));
  const auto answer = client->read();
  REQUIRE(answer);
  CHECK(answer->result_int() == 400);
  CHECK(harness.handled().empty());
}

TEST_CASE("headers that do not arrive in time are answered 408 and closed, a silent connection too") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.header_timeout = std::chrono::milliseconds(200);
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto partial = connect_unix(dir.path() / "api.sock");
  REQUIRE(partial->send("GET /slow HTTP/1.1\r\nHost: x\r\n"));
  auto silent = connect_unix(dir.path() / "api.sock");
  for (auto* client : {partial.get(), silent.get()}) {
    const auto answer = client->read();
    REQUIRE(answer);
    CHECK(answer->result_int() == 408);
    CHECK(problem_code(*answer) == "request_timeout");
    CHECK_FALSE(answer->keep_alive());
    CHECK(client->closed_by_server());
  }
  CHECK(harness.handled().empty());
  // The metrics hear of both; the audit log of neither (nothing whole was attempted).
  REQUIRE(harness.wait_seen(2));
  for (const auto& seen : harness.seen()) {
    CHECK(seen.status == 408);
    CHECK_FALSE(seen.authenticated);
  }
}

TEST_CASE("a body that does not arrive in time is answered 408") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.request_timeout = std::chrono::milliseconds(200);
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  REQUIRE(client->send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"));
  const auto answer = client->read();
  REQUIRE(answer);
  CHECK(answer->result_int() == 408);
  CHECK(boost::json::parse(answer->body()).at("detail").as_string().find("body") != std::string::npos);
  CHECK(client->closed_by_server());
  CHECK(harness.handled().empty());
}

TEST_CASE("an idle keep-alive connection is closed") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.idle_timeout = std::chrono::milliseconds(200);
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  auto response = client->request(verb::get, "/first");
  REQUIRE(response);
  CHECK(response->keep_alive());
  CHECK(client->closed_by_server());
}

// ---- the connection budget ---------------------------------------------------------------------

// Three slots, the last a health reserve; /probe and /block-probe (which blocks) are the probes.
ServerOptions budget_options(const fs::path& socket) {
  ServerOptions options = unix_options(socket);
  options.limits.max_connections = 3;
  options.limits.health_reserve = 1;
  options.probe_paths = {"/probe", "/block-probe"};
  return options;
}

// `count` connections each send GET /block; returns once the handler has begun `begun` of them.
std::vector<std::unique_ptr<testing::UnixClient>> send_blocking(const fs::path& socket, Harness& harness, int count,
                                                                std::size_t begun) {
  std::vector<std::unique_ptr<testing::UnixClient>> busy;
  for (int i = 0; i < count; ++i) {
    busy.push_back(connect_unix(socket));
    REQUIRE(busy.back()->send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"));
  }
  for (int i = 0; i < 500 && harness.handled().size() < begun; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(harness.handled().size() == begun);
  return busy;
}

TEST_CASE("with the general slots taken, the oldest stalled connection is evicted with a 408") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(budget_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto oldest = connect_unix(dir.path() / "api.sock");
  REQUIRE(oldest->send("GET /stalled HTTP/1.1\r\n"));
  auto younger = connect_unix(dir.path() / "api.sock");
  REQUIRE(younger->send("GET /stalled HTTP/1.1\r\n"));
  // Both stall in the two general slots; the server must see them before the next one comes.
  for (int i = 0; i < 500 && (*server)->connection_stats().open < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE((*server)->connection_stats().open == 2);

  auto operator_client = connect_unix(dir.path() / "api.sock");
  const auto served = operator_client->request(verb::get, "/work");
  REQUIRE(served);
  CHECK(served->result_int() == 200);
  CHECK(served->keep_alive());  // a general slot, not probation
  const auto evicted = oldest->read();
  REQUIRE(evicted);
  CHECK(evicted->result_int() == 408);
  CHECK(oldest->closed_by_server());
  const auto stats = (*server)->connection_stats();
  CHECK(stats.evicted == 1);
  CHECK(stats.open == 2);
  CHECK(harness.handled() == std::vector<std::string>{"/work"});
}

TEST_CASE("with every general slot busy, a probe is served from the reserve, anything else is 503") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(budget_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto busy = send_blocking(dir.path() / "api.sock", harness, 2, 2);

  auto probe = connect_unix(dir.path() / "api.sock");
  const auto live = probe->request(verb::get, "/probe");
  REQUIRE(live);
  CHECK(live->result_int() == 200);
  CHECK_FALSE(live->keep_alive());  // served once
  CHECK(probe->closed_by_server());

  auto other = connect_unix(dir.path() / "api.sock");
  const auto shed = other->request(verb::post, "/change", "{}");
  REQUIRE(shed);
  CHECK(shed->result_int() == 503);
  CHECK(problem_code(*shed) == "too_many_connections");
  CHECK_FALSE((*shed)[testing::http::field::retry_after].empty());
  CHECK(other->closed_by_server());

  // The reserve held too (a probe that blocks): the next connection is refused unread.
  auto reserve = connect_unix(dir.path() / "api.sock");
  REQUIRE(reserve->send("GET /block-probe HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (int i = 0; i < 500 && harness.handled().size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(harness.handled().size() == 4);
  auto refused = connect_unix(dir.path() / "api.sock");
  const auto full = refused->request(verb::get, "/probe");
  REQUIRE(full);
  CHECK(full->result_int() == 503);
  CHECK(refused->closed_by_server());
  const auto stats = (*server)->connection_stats();
  CHECK(stats.refused_full == 1);
  CHECK(stats.reserve == 1);

  harness.release_blocked();
  for (auto& client : busy) {
    const auto answer = client->read();
    REQUIRE(answer);
    CHECK(answer->body() == "unblocked");
  }
  CHECK(harness.handled() == std::vector<std::string>{"/block", "/block", "/probe", "/block-probe"});
}

TEST_CASE("a probe is answered while every handler thread is blocked: the probes have a thread of their own") {
  TempDir dir;
  Harness harness;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.handler_threads = 2;
  options.probe_paths = {"/probe"};
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  // Two hold the handler threads, the third waits for one.
  auto busy = send_blocking(dir.path() / "api.sock", harness, 3, 2);
  auto probe = connect_unix(dir.path() / "api.sock");
  const auto live = probe->request(verb::get, "/probe");
  REQUIRE(live);
  CHECK(live->result_int() == 200);
  auto other = connect_unix(dir.path() / "api.sock");
  REQUIRE(other->send("GET /queued HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Anything else still waits for a handler thread: /queued has not run.
  CHECK(harness.handled() == std::vector<std::string>{"/block", "/block", "/probe"});
  harness.release_blocked();
  for (auto& client : busy) {
    const auto answer = client->read();
    REQUIRE(answer);
    CHECK(answer->body() == "unblocked");
  }
  const auto queued = other->read();
  REQUIRE(queued);
  CHECK(queued->result_int() == 200);
}

// A TCP client whose source address is `source` (any 127.0.0.0/8 address is this machine's).
std::unique_ptr<testing::TcpClient> connect_tcp_from(const std::string& source, uint16_t port) {
  auto client = std::make_unique<testing::TcpClient>();
  auto& socket = client->stream();
  testing::error_code error;
  socket.open(testing::asio::ip::tcp::v4(), error);
  if (!error) socket.bind({testing::asio::ip::make_address(source), 0}, error);
  if (!error) socket.connect({testing::asio::ip::make_address("127.0.0.1"), port}, error);
  return error ? nullptr : std::move(client);
}

TEST_CASE("one TCP peer address holds at most max_connections_per_peer, and another is served") {
  Harness harness;
  ServerOptions options = token_options();
  options.limits.max_connections_per_peer = 2;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  const uint16_t port = tcp_port(**server);
  std::vector<std::unique_ptr<testing::TcpClient>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(connect_tcp_from("127.0.0.2", port));
    REQUIRE(held.back());
    REQUIRE(held.back()->request(verb::get, "/held", "", bearer("reader-secret")));
  }
  auto third = connect_tcp_from("127.0.0.2", port);
  REQUIRE(third);
  const auto refused = third->request(verb::get, "/refused", "", bearer("reader-secret"));
  REQUIRE(refused);
  CHECK(refused->result_int() == 503);
  CHECK(boost::json::parse(refused->body()).at("detail").as_string().find("max_connections_per_peer") !=
        std::string::npos);
  CHECK(third->closed_by_server());

  auto elsewhere = connect_tcp_from("127.0.0.3", port);
  REQUIRE(elsewhere);
  const auto served = elsewhere->request(verb::get, "/served", "", bearer("reader-secret"));
  REQUIRE(served);
  CHECK(served->result_int() == 200);
  CHECK((*server)->connection_stats().refused_peer == 1);
  CHECK(harness.handled() == std::vector<std::string>{"/held", "/held", "/served"});
}

TEST_CASE("event streams beyond max_event_streams are answered 503") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.max_event_streams = 1;
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto first = connect_unix(dir.path() / "api.sock");
  REQUIRE(first->send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(first->read_until("\r\n\r\n"));
  auto second = connect_unix(dir.path() / "api.sock");
  const auto refused = second->request(verb::get, "/events");
  REQUIRE(refused);
  CHECK(refused->result_int() == 503);
  CHECK(boost::json::parse(refused->body()).at("detail").as_string().find("max_event_streams") != std::string::npos);
  CHECK(second->closed_by_server());
  CHECK((*server)->connection_stats().event_streams == 1);
  // The slot comes back when the stream ends.
  first.reset();
  for (int i = 0; i < 500 && (*server)->connection_stats().event_streams > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto third = connect_unix(dir.path() / "api.sock");
  REQUIRE(third->send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  const auto header = third->read_until("\r\n\r\n");
  REQUIRE(header);
  CHECK(header->starts_with("HTTP/1.1 200"));
}

TEST_CASE("a health reserve as large as the connections is refused at start") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.max_connections = 4;
  options.limits.health_reserve = 4;
  Harness harness;
  const auto server = harness.start(options);
  REQUIRE_FALSE(server.ok());
  CHECK(server.error().message.find("health_reserve") != std::string::npos);
}

TEST_CASE("keep-alive serves two requests on one connection, and HTTP/1.0 closes after one") {
  Harness harness;
  auto server = harness.start(token_options());
  REQUIRE_MESSAGE(server.ok(), failure(server));
  const uint16_t port = tcp_port(**server);
  auto client = connect_tcp("127.0.0.1", port);
  auto one = client->request(verb::get, "/one", "", bearer("reader-secret"));
  auto two = client->request(verb::get, "/two", "", bearer("reader-secret"));
  REQUIRE(one);
  REQUIRE(two);
  CHECK(one->body() == "token:reader reader GET /one");
  CHECK(two->body() == "token:reader reader GET /two");
  REQUIRE(harness.wait_seen(2));
  CHECK(harness.seen()[0].remote == harness.seen()[1].remote);  // same client port: same connection

  auto old = connect_tcp("127.0.0.1", port);
  auto response = old->request(verb::get, "/old", "", bearer("reader-secret"), 10);
  REQUIRE(response);
  CHECK(response->result_int() == 200);
  CHECK(response->version() == 10);
  CHECK(old->closed_by_server());
}

TEST_CASE("a body sent after Expect: 100-continue is read") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  REQUIRE(client->send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  const auto interim = client->read_until("\r\n\r\n");
  REQUIRE(interim);
  CHECK(interim->starts_with("HTTP/1.1 100 Continue"));
  REQUIRE(client->send("hello"));
  client->clear_text();
  const auto rest = client->read_until("POST /upload");
  REQUIRE(rest);
  CHECK(rest->find("200 OK") != std::string::npos);
}

TEST_CASE("a handler that throws is a 500 problem") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto response = connect_unix(dir.path() / "api.sock")->request(verb::get, "/throw");
  REQUIRE(response);
  CHECK(response->result_int() == 500);
  CHECK(problem_code(*response) == "internal");
}

// ---- threads -----------------------------------------------------------------------------------

TEST_CASE("a blocking handler does not hold up another connection's request") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.network_threads = 1;
  options.handler_threads = 2;
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto blocked = connect_unix(dir.path() / "api.sock");
  REQUIRE(blocked->send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto other = connect_unix(dir.path() / "api.sock");
  auto fast = other->request(verb::get, "/fast");
  REQUIRE(fast);
  CHECK(fast->result_int() == 200);
  // /block is still waiting: its answer has not been seen.
  for (const auto& seen : harness.seen()) CHECK(seen.path != "/block");
  harness.release_blocked();
  auto unblocked = blocked->read();
  REQUIRE(unblocked);
  CHECK(unblocked->body() == "unblocked");
}

// ---- event streams -----------------------------------------------------------------------------

TEST_CASE("an event stream delivers frames written after subscribing and ends on stop") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.event_heartbeat = std::chrono::milliseconds(50);
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  REQUIRE(client->send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  const auto header = client->read_until("\r\n\r\n");
  REQUIRE(header);
  CHECK(header->starts_with("HTTP/1.1 200"));
  CHECK(header->find("Content-Type: text/event-stream") != std::string::npos);
  CHECK(header->find("Cache-Control: no-cache") != std::string::npos);
  CHECK(header->find("Content-Length") == std::string::npos);

  auto stream = harness.stream();
  REQUIRE(stream);
  client->clear_text();
  stream->push("id: 1\nevent: vm\ndata: {\"vm\":\"a\"}\n\n");
  const auto first = client->read_until("\n\n");
  REQUIRE(first);
  CHECK(first->find("id: 1\nevent: vm\ndata: {\"vm\":\"a\"}\n\n") != std::string::npos);
  stream->push("id: 2\nevent: vm\ndata: {}\n\n");
  CHECK(client->read_until("id: 2\n"));
  // Nothing more to say: the heartbeat comment keeps the stream visibly alive.
  CHECK(client->read_until(": keepalive\n\n"));
  stream.reset();

  (*server)->stop();
  CHECK(client->closed_by_server());
  CHECK(harness.weak_stream().expired());  // the server let go of it (unsubscribed)
  REQUIRE(harness.wait_seen(1));
  CHECK(harness.seen()[0].path == "/events");
  CHECK(harness.seen()[0].status == 200);
}

TEST_CASE("a reader that makes no room is sent a last frame saying why, then closed") {
  TempDir dir;
  ServerOptions options = unix_options(dir.path() / "api.sock");
  options.limits.event_send_buffer = 8192;
  options.limits.request_timeout = std::chrono::milliseconds(300);
  Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  REQUIRE(client->send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(client->read_until("\r\n\r\n"));
  auto stream = harness.stream();
  REQUIRE(stream);
  // Far more than the kernel holds for it: the reader reads nothing meanwhile.
  const std::string data(1000, 'x');
  for (int i = 1; i <= 200; ++i) stream->push("id: " + std::to_string(i) + "\ndata: " + data + "\n\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  client->clear_text();
  const auto text = client->read_until("event: end\n");
  REQUIRE(text);
  const auto last = client->read_until("}\n\n");
  REQUIRE(last);
  CHECK(last->find("\"reason\":\"slow_reader\"") != std::string::npos);
  CHECK(last->find("id: 200\n") == std::string::npos);  // most never left the server
  CHECK(client->closed_by_server());
  stream.reset();
  CHECK(harness.wait_stream_released());  // the server let go of it
}

TEST_CASE("an event stream ends when the client goes away") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  REQUIRE(client->send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(client->read_until("\r\n\r\n"));
  REQUIRE(harness.stream());
  CHECK((*server)->connection_stats().open == 1);
  CHECK((*server)->connection_stats().event_streams == 1);
  // The observer heard of the stream when it began.
  REQUIRE(harness.wait_seen(1));
  CHECK(harness.seen()[0].path == "/events");
  client.reset();
  CHECK(harness.wait_stream_released());
}

TEST_CASE("stop closes open connections and joins the threads") {
  TempDir dir;
  Harness harness;
  auto server = harness.start(unix_options(dir.path() / "api.sock"));
  REQUIRE_MESSAGE(server.ok(), failure(server));
  auto client = connect_unix(dir.path() / "api.sock");
  REQUIRE(client->request(verb::get, "/x"));
  (*server)->stop();
  CHECK(client->closed_by_server());
  CHECK((*server)->connection_stats().open == 0);
  CHECK_FALSE(connect_unix(dir.path() / "api.sock"));
}

}  // namespace
}  // namespace hostagent::api
