// What the REST API's routes cost over the HTTP floor: the daemon's service on libvirt's in-process
// test:///default driver and the simulated vela2 host (8 one-GPU VMs created first), served by the
// HTTP server with the /v1 routes on a unix socket and on TCP (127.0.0.1, bearer token). A load
// generator of its own drives GET /v1/vms and GET /v1/host over keep-alive connections, at 1 and 64
// connections, over each transport; the baseline is GET /v1/health/live on the same server,
// transport and connections (what HTTP itself costs here). Arms run interleaved in rounds (one round
// = every arm once, the first arm rotating), so drift on a shared machine hits them alike. Then the
// p99 of GET /v1/vms while another connection creates and deletes VMs without pause, against the
// same reads with nothing in flight, also interleaved. A scrape of /v1/metrics is one more arm of
// the first blocks (its cost against the probe's and the reads'). Last, GET /v1/vms at 1, 8 and 64
// connections with 500 stalled connections present (each sent half a request and waits: a
// slowloris, opened before the arm and closed after it), against the same reads without them,
// interleaved: what the connection budget's eviction costs the clients it protects. And the health
// probe alone against the probe while 8 connections scrape /v1/metrics without pause. Last, a scrape
// of /v1/metrics with the 8 VMs against one with none (the VMs deleted and made again between arms).
//
// wrk is not used: it cannot talk to a unix socket, the daemon's default listener. The generator
// is one Asio thread driving every connection (closed loop: each connection sends its next request
// when the previous answer is read), so on a small machine it takes one core's share, not 64
// threads' worth of switching.
//
// Usage: bench_api [ROUNDS [PHASE_MS]]   (defaults 6 and 500: about 50 s)
//        bench_api --quick               (1 round of 100 ms: a smoke run for CI)
//        bench_api --profile PATH SECONDS (GET PATH alone at 64 connections over the unix socket, for
//                                          `perf record`: the reads alone, no other arm in the profile)
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "assembly.hpp"
#include "hostagent/api/http_server.hpp"
#include "hostagent/api/rest_api.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/service/vm_service.hpp"

#include "scratch_dir.hpp"

namespace {

using namespace hostagent;
namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;
using Endpoint = asio::generic::stream_protocol::endpoint;
using Socket = asio::generic::stream_protocol::socket;

constexpr const char* kToken = "bench-api-token";
constexpr const char* kVmShape = "gx3-16x128x1h100";    // one GPU: 8 of them fill vela2's GPUs
constexpr const char* kChurnShape = "bench-api-small";  // no devices: fits beside the 8
constexpr int kVms = 8;

// While the benchmark runs, stderr goes to the daemon's log (below); a failure shows both.
int g_terminal_stderr = -1;
fs::path g_daemon_log;

[[noreturn]] void fail(const std::string& what) {
  if (g_terminal_stderr >= 0) ::dup2(g_terminal_stderr, STDERR_FILENO);
  std::fprintf(stderr, "bench_api: %s\n", what.c_str());
  std::ifstream in(g_daemon_log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (!lines.empty()) std::fprintf(stderr, "the daemon's last log lines (%s):\n", g_daemon_log.c_str());
  for (std::size_t i = lines.size() > 20 ? lines.size() - 20 : 0; i < lines.size(); ++i) {
    std::fprintf(stderr, "  %s\n", lines[i].c_str());
  }
  std::error_code ec;
  if (!g_daemon_log.empty()) fs::remove_all(g_daemon_log.parent_path(), ec);  // the scratch directory
  std::_Exit(1);  // not exit(): the server's and the service's threads are still running
}

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Nearest rank over a sorted copy.
double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::max<std::size_t>(rank, 1) - 1];
}

// The daemon and the server log a line per operation and per warning to stderr: into a file while
// the benchmark runs, so the table stays readable.
void stderr_to_file(const fs::path& file) {
  g_daemon_log = file;
  g_terminal_stderr = ::dup(STDERR_FILENO);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
}

// ---- the transports --------------------------------------------------------------------------

struct Transport {
  std::string name;  // "unix", "tcp"
  Endpoint endpoint;
  bool bearer = false;  // TCP needs the token; the unix socket's peers are operators
};

void set_common_headers(http::request_header<>& header, const Transport& transport) {
  header.set(http::field::host, "localhost");
  if (transport.bearer) header.set(http::field::authorization, std::string("Bearer ") + kToken);
}

Socket connect(asio::io_context& context, const Transport& transport) {
  Socket socket(context);
  boost::system::error_code ec;
  socket.connect(transport.endpoint, ec);
  if (ec) fail("connect over " + transport.name + ": " + ec.message());
  // Small requests and answers: without it, Nagle and delayed ACKs add 40 ms to TCP round trips.
  if (transport.name == "tcp") socket.set_option(asio::ip::tcp::no_delay(true));
  return socket;
}

// ---- the load generator ----------------------------------------------------------------------

// CPU time of the whole process (user and system, every thread): the server's and the client's.
double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct PhaseResult {
  std::vector<double> latencies_ms;
  double seconds = 0;
  double cpu_seconds = 0;      // the process's, over the phase
  std::size_t body_bytes = 0;  // of the last answer
  double rate() const { return static_cast<double>(latencies_ms.size()) / seconds; }
};

// `count` keep-alive connections, opened once and reused by every phase; closed loop.
class LoadClient {
  static constexpr std::size_t kReadBuffer = 64 << 10;  // what a scraper reads with (Prometheus: 32 KiB+)

 public:
  LoadClient(const Transport& transport, int count) : transport_(transport) {
    for (int i = 0; i < count; ++i) {
      connections_.push_back(std::make_unique<Connection>(connect(context_, transport)));
      // Beast reads into what the buffer has room for, at least 512 bytes, and a buffer that never
      // fills never grows: without room made first, a 34 KB answer is read 512 bytes a call, and the
      // client's recv(2)s, not the server, would be most of what a large answer costs here.
      connections_.back()->buffer.reserve(kReadBuffer);
    }
  }

  // GET `target` on every connection until `duration` has passed; every answer must be 200.
  PhaseResult run(const std::string& target, std::chrono::milliseconds duration) {
    result_ = PhaseResult{};
    result_.latencies_ms.reserve(1 << 16);
    const auto start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    deadline_ = start + duration;
    context_.restart();
    for (auto& connection : connections_) {
      connection->request = http::request<http::empty_body>(http::verb::get, target, 11);
      set_common_headers(connection->request, transport_);
      send(*connection);
    }
    context_.run();
    result_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    result_.cpu_seconds = process_cpu_seconds() - cpu_start;
    return std::move(result_);
  }

 private:
  struct Connection {
    explicit Connection(Socket s) : socket(std::move(s)) {}
    Socket socket;
    beast::flat_buffer buffer;
    http::request<http::empty_body> request;
    std::optional<http::response<http::string_body>> response;
    Clock::time_point sent;
  };

  void send(Connection& connection) {
    connection.sent = Clock::now();
    connection.response.emplace();
    http::async_write(connection.socket, connection.request, [this, &connection](beast::error_code ec, std::size_t) {
      if (ec) fail("write " + std::string(connection.request.target()) + ": " + ec.message());
      http::async_read(connection.socket, connection.buffer, *connection.response,
                       [this, &connection](beast::error_code read_ec, std::size_t) { received(connection, read_ec); });
    });
  }

  void received(Connection& connection, beast::error_code ec) {
    const auto now = Clock::now();
    const std::string target(connection.request.target());
    if (ec) fail("read the answer to GET " + target + " over " + transport_.name + ": " + ec.message());
    const auto& response = *connection.response;
    if (response.result_int() != 200) {
      fail("GET " + target + " over " + transport_.name + ": " + std::to_string(response.result_int()) + " " +
           response.body());
    }
    if (!response.keep_alive()) fail("GET " + target + ": the server closed a keep-alive connection");
    result_.latencies_ms.push_back(ms_between(connection.sent, now));
    result_.body_bytes = response.body().size();
    if (now < deadline_) send(connection);
  }

  Transport transport_;
  asio::io_context context_;
  std::vector<std::unique_ptr<Connection>> connections_;
  Clock::time_point deadline_;
  PhaseResult result_;
};

// The string member `key` of a JSON object answer.
std::string json_string(const std::string& body, const char* key) {
  boost::system::error_code ec;
  const auto value = boost::json::parse(body, ec);
  const auto* object = ec ? nullptr : value.if_object();
  const auto* member = object == nullptr ? nullptr : object->if_contains(key);
  if (member == nullptr || !member->is_string()) fail(std::string("no string '") + key + "' in the answer " + body);
  return std::string(member->get_string());
}

// ---- one synchronous client, for setup and the churn ------------------------------------------

class SyncClient {
 public:
  explicit SyncClient(const Transport& transport) : transport_(transport), socket_(connect(context_, transport)) {}

  http::response<http::string_body> call(http::verb verb, const std::string& target, const std::string& body = "") {
    http::request<http::string_body> request{verb, target, 11};
    set_common_headers(request, transport_);
    if (!body.empty()) {
      request.set(http::field::content_type, "application/json");
      request.body() = body;
    }
    request.prepare_payload();
    http::write(socket_, request);
    http::response_parser<http::string_body> parser;
    http::read(socket_, buffer_, parser);
    return parser.release();
  }

  // POST or DELETE that must answer 202 with an operation: its id.
  std::string begin(http::verb verb, const std::string& target, const std::string& body = "") {
    const auto response = call(verb, target, body);
    if (response.result_int() != 202) {
      fail(std::string(http::to_string(verb)) + " " + target + ": " + std::to_string(response.result_int()) + " " +
           response.body());
    }
    return json_string(response.body(), "id");
  }

  // Polls the operation until it ends; fails the benchmark when it failed.
  void wait(const std::string& operation) {
    for (;;) {
      const auto response = call(http::verb::get, "/v1/operations/" + operation);
      if (response.result_int() != 200) fail("GET /v1/operations/" + operation + ": " + response.body());
      const auto state = json_string(response.body(), "state");
      if (state == "succeeded") return;
      if (state == "failed") fail("operation " + operation + " failed: " + response.body());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  Transport transport_;
  asio::io_context context_;
  Socket socket_;
  beast::flat_buffer buffer_;
};

std::string create_body(const std::string& name, const std::string& shape, const std::string& boot_image) {
  boost::json::object body{{"name", name}, {"template", shape}, {"request_id", "bench-" + name}};
  if (!boot_image.empty()) body["boot_image"] = boot_image;
  return boost::json::serialize(body);
}

// Another connection creates a VM, waits for it, deletes it, waits, and again, until stopped: an
// operation is in flight the whole time. stop() lets the cycle under way finish, so the next quiet
// arm starts with nothing in flight.
class Churn {
 public:
  explicit Churn(const Transport& transport) : client_(transport) {}
  ~Churn() { stop(); }
  Churn(const Churn&) = delete;
  Churn& operator=(const Churn&) = delete;

  void start() {
    stopping_ = false;
    thread_ = std::thread([this] {
      while (!stopping_) {
        // Unique in the run: a create that repeats an earlier request id is answered with that
        // earlier operation (the API's idempotent create), and creates nothing.
        static std::atomic<long> made{0};
        const std::string name = "bench-churn-" + std::to_string(made++);
        client_.wait(client_.begin(http::verb::post, "/v1/vms", create_body(name, kChurnShape, "")));
        client_.wait(client_.begin(http::verb::delete_, "/v1/vms/" + name));
        ++cycles_;
      }
    });
  }
  void stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }
  long cycles() const { return cycles_; }

 private:
  SyncClient client_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<long> cycles_{0};
};

// ---- the daemon ------------------------------------------------------------------------------

struct Daemon {
  std::unique_ptr<service::VmService> service;
  std::unique_ptr<api::RestApi> rest;
  std::unique_ptr<api::HttpServer> server;
  std::vector<Transport> transports;
  api::ServerOptions options;
};

void write_sparse_file(const fs::path& path, uintmax_t size) {
  std::ofstream(path, std::ios::binary).close();
  fs::resize_file(path, size);
}

Result<Daemon> start_daemon(const fs::path& scratch) {
  fs::create_directories(scratch / "templates");
  // vela2 offers 1 GiB pages only; no boot image: the churn needs a domain, not an OS.
  std::ofstream(scratch / "templates" / (std::string(kChurnShape) + ".yaml"))
      << "name: " << kChurnShape << "\ndescription: bench_api's churn VM, no devices\nvcpus: 2\nmemory: 2GiB\n"
      << "hugepage_size: 1G\nguest_numa: {cells: 1}\nmachine: q35\nfirmware: bios\n";
  auto config = config::embedded_default_config("vela2", scratch);
  config.template_directories = {fs::path(HOSTAGENT_SOURCE_DIR) / "vmtemplates" / "templates", scratch / "templates"};

  Daemon daemon;
  HA_TRY(auto parts, cli::assemble_parts(config));
  HA_TRY(daemon.service, daemon::start_service(std::move(parts)));
  api::RestApiOptions rest_options;
  rest_options.audit_log = scratch / "audit.log";
  rest_options.template_directories = config.template_directories;
  HA_TRY(daemon.rest, api::RestApi::make(*daemon.service, std::move(rest_options)));

  ListenAddress unix_address;
  unix_address.socket_path = scratch / "api.sock";
  ListenAddress tcp_address;  // port 0: any free port (the configuration's parser wants 1..65535)
  tcp_address.kind = ListenAddress::Kind::tcp;
  tcp_address.host = "127.0.0.1";
  daemon.options.listen = {unix_address, tcp_address};
  daemon.options.operator_token = kToken;
  api::RestApi* rest = daemon.rest.get();
  HA_TRY(daemon.server, api::HttpServer::start(
                            daemon.options, [rest](const api::HttpRequest& request) { return rest->handle(request); },
                            [rest](const api::RequestRecord& record) { rest->observe(record); }));

  for (const auto& endpoint : daemon.server->endpoints()) {
    if (endpoint.kind == ListenAddress::Kind::unix_socket) {
      daemon.transports.push_back(
          {"unix", Endpoint(asio::local::stream_protocol::endpoint(endpoint.socket_path)), false});
    } else {
      const asio::ip::tcp::endpoint tcp(asio::ip::make_address(endpoint.host), endpoint.port);
      daemon.transports.push_back({"tcp", Endpoint(tcp), true});
    }
  }
  std::sort(daemon.transports.begin(), daemon.transports.end(),
            [](const Transport& a, const Transport& b) { return a.name > b.name; });  // unix first
  if (daemon.transports.size() != 2) return Error{ErrorCode::internal, "the server did not report both listeners"};
  return daemon;
}

void create_vms(const Transport& transport, const fs::path& scratch) {
  const fs::path image = scratch / "images" / "boot.raw";  // the embedded default's images.directories
  fs::create_directories(image.parent_path());
  write_sparse_file(image, 1ULL << 30);
  SyncClient client(transport);
  for (int i = 0; i < kVms; ++i) {
    const std::string name = "bench-vm-" + std::to_string(i);
    client.wait(client.begin(http::verb::post, "/v1/vms", create_body(name, kVmShape, image.string())));
  }
}

// ---- the measurements ------------------------------------------------------------------------

struct Arm {
  std::string target;
  std::vector<double> rates;      // one per round
  std::vector<double> latencies;  // every request of every round
  std::size_t body_bytes = 0;
  double cpu_seconds = 0;      // over every round
  bool cpu_is_its_own = true;  // false when other load (a churn, a flood) ran in the same process
  void add(PhaseResult&& phase) {
    rates.push_back(phase.rate());
    cpu_seconds += phase.cpu_seconds;
    latencies.insert(latencies.end(), phase.latencies_ms.begin(), phase.latencies_ms.end());
    body_bytes = phase.body_bytes;
  }
  double rate() const { return quantile(rates, 0.5); }
  double p50() const { return quantile(latencies, 0.5); }
  double p99() const { return quantile(latencies, 0.99); }
  double cpu_us() const { return latencies.empty() ? 0 : cpu_seconds * 1e6 / static_cast<double>(latencies.size()); }
};

struct Settings {
  int rounds = 6;
  std::chrono::milliseconds phase{500};
};

void print_arm(const Arm& arm, const Arm* floor) {
  std::printf("    %-28s %9.0f %8.3f %8.3f %9zu", arm.target.c_str(), arm.rate(), arm.p50(), arm.p99(), arm.body_bytes);
  if (arm.cpu_is_its_own) {
    std::printf(" %7.0f", arm.cpu_us());
  } else {
    std::printf(" %7s", "-");
  }
  if (floor != nullptr) std::printf(" %9.3f %9.2f", arm.rate() / floor->rate(), arm.p99() / floor->p99());
  if (floor != nullptr && arm.cpu_is_its_own && floor->cpu_is_its_own)
    std::printf(" %8.2f", arm.cpu_us() / floor->cpu_us());
  std::printf("\n");
}

// The quiet arm and the loaded one alternately, settings.rounds times each, the first rotating: drift
// on a shared machine hits both alike.
void interleave(const Settings& settings, const std::function<void()>& quiet, const std::function<void()>& loaded) {
  for (int round = 0; round < settings.rounds; ++round) {
    for (int i = 0; i < 2; ++i) ((round + i) % 2 == 0 ? quiet : loaded)();
  }
}

// One transport and connection count: the floor and the two reads, interleaved.
void throughput(const Transport& transport, int connections, const Settings& settings) {
  std::vector<Arm> arms{
      {"/v1/health/live", {}, {}, 0}, {"/v1/vms", {}, {}, 0}, {"/v1/host", {}, {}, 0}, {"/v1/metrics", {}, {}, 0}};
  LoadClient client(transport, connections);
  for (const auto& arm : arms) client.run(arm.target, std::chrono::milliseconds(50));  // warm
  for (int round = 0; round < settings.rounds; ++round) {
    for (std::size_t i = 0; i < arms.size(); ++i) {
      auto& arm = arms[(round + i) % arms.size()];
      arm.add(client.run(arm.target, settings.phase));
    }
  }
  std::printf("  %s, %d connection%s\n", transport.name.c_str(), connections, connections == 1 ? "" : "s");
  print_arm(arms[0], nullptr);
  for (std::size_t i = 1; i < arms.size(); ++i) print_arm(arms[i], &arms[0]);
  std::fflush(stdout);
}

// `count` connections that each sent half a request line and wait, for as long as this lives: the
// server holds them until its header_timeout (5 s) or until it evicts them for newer ones.
class Stalls {
 public:
  Stalls(const Transport& transport, int count) {
    static const std::string kHalf = "GET /v1/vms HTTP/1.1\r\nHost: localhost\r\n";
    for (int i = 0; i < count; ++i) {
      sockets_.push_back(connect(context_, transport));
      boost::system::error_code ec;
      asio::write(sockets_.back(), asio::buffer(kHalf), ec);
      if (ec) fail("a stalled connection's half request: " + ec.message());
    }
  }

 private:
  asio::io_context context_;
  std::vector<Socket> sockets_;
};

constexpr int kStalled = 500;

// GET /v1/vms without and with kStalled stalled connections present, interleaved.
void under_stall(const Transport& transport, int connections, const Settings& settings) {
  Arm quiet{"/v1/vms", {}, {}, 0};
  Arm stalled{"/v1/vms, 500 stalled", {}, {}, 0};
  LoadClient client(transport, connections);
  client.run("/v1/vms", std::chrono::milliseconds(50));  // warm: its connections past their first request
  interleave(
      settings, [&] { quiet.add(client.run("/v1/vms", settings.phase)); },
      [&] {
        const Stalls stalls(transport, kStalled);
        stalled.add(client.run("/v1/vms", settings.phase));
      });
  std::printf("  %s, %d connection%s\n", transport.name.c_str(), connections, connections == 1 ? "" : "s");
  print_arm(quiet, nullptr);
  print_arm(stalled, &quiet);
  std::fflush(stdout);
}

constexpr int kScrapers = 8;

// GET /v1/health/live on one connection (a probe) alone, and while kScrapers connections scrape
// /v1/metrics without pause, interleaved: whether a scrape flood slows the probe.
void under_scrape_flood(const Transport& transport, const Settings& settings) {
  Arm quiet{"/v1/health/live", {}, {}, 0};
  Arm flooded{"/v1/health/live, scrape flood", {}, {}, 0};
  flooded.cpu_is_its_own = false;
  LoadClient probe(transport, 1);
  LoadClient scrapers(transport, kScrapers);
  probe.run("/v1/health/live", std::chrono::milliseconds(50));  // warm
  scrapers.run("/v1/metrics", std::chrono::milliseconds(50));
  double scrapes = 0;
  double flood_seconds = 0;
  interleave(
      settings, [&] { quiet.add(probe.run("/v1/health/live", settings.phase)); },
      [&] {
        PhaseResult flood;
        // A little longer than the probe's phase, so the probe never runs without the flood.
        std::thread flooding(
            [&] { flood = scrapers.run("/v1/metrics", settings.phase + std::chrono::milliseconds(20)); });
        flooded.add(probe.run("/v1/health/live", settings.phase));
        flooding.join();
        scrapes += static_cast<double>(flood.latencies_ms.size());
        flood_seconds += flood.seconds;
      });
  std::printf("  %s; %.0f scrapes/s during the flood arm\n", transport.name.c_str(), scrapes / flood_seconds);
  print_arm(quiet, nullptr);
  print_arm(flooded, &quiet);
  std::fflush(stdout);
}

// The client and the server each hold every stalled connection: past the soft limit of 1024.
void raise_open_files() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) fail("getrlimit");
  constexpr rlim_t kWanted = rlim_t{4} * kStalled;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < kWanted) {
    fail("raise the open-file limit to " + std::to_string(kWanted) + " (ulimit -Hn)");
  }
}

// GET /v1/vms with nothing in flight, and while the churn runs, interleaved.
void under_churn(const Transport& transport, int connections, const Settings& settings) {
  Arm quiet{"/v1/vms, nothing in flight", {}, {}, 0};
  Arm busy{"/v1/vms, creates+deletes", {}, {}, 0};
  busy.cpu_is_its_own = false;
  LoadClient client(transport, connections);
  Churn churn(transport);
  double churn_seconds = 0;
  interleave(
      settings, [&] { quiet.add(client.run("/v1/vms", settings.phase)); },
      [&] {
        churn.start();
        auto phase = client.run("/v1/vms", settings.phase);
        churn_seconds += phase.seconds;
        busy.add(std::move(phase));
        churn.stop();
      });
  std::printf("  %s, %d connection%s; %.1f create+delete cycles/s during the churn arm\n", transport.name.c_str(),
              connections, connections == 1 ? "" : "s", static_cast<double>(churn.cycles()) / churn_seconds);
  print_arm(quiet, nullptr);
  print_arm(busy, &quiet);
  std::fflush(stdout);
}

// kVms VMs of kVmShape, made and deleted as one: each making names a generation of its own, since a
// create's request id is its VM's for good (a repeat would answer the first create, making nothing).
class VmSet {
 public:
  VmSet(const Transport& transport, fs::path image) : client_(transport), image_(std::move(image)) {}
  void make() {
    ++generation_;
    for (int i = 0; i < kVms; ++i) {
      names_.push_back("bench-scrape-" + std::to_string(generation_) + "-" + std::to_string(i));
      client_.wait(client_.begin(http::verb::post, "/v1/vms", create_body(names_.back(), kVmShape, image_.string())));
    }
  }
  void remove() {
    for (const auto& name : names_) client_.wait(client_.begin(http::verb::delete_, "/v1/vms/" + name));
    names_.clear();
  }
  // Adopts VMs made elsewhere, to delete with the set.
  void adopt(std::vector<std::string> names) { names_ = std::move(names); }
  bool empty() const { return names_.empty(); }

 private:
  SyncClient client_;
  fs::path image_;
  int generation_ = 0;
  std::vector<std::string> names_;
};

// GET /v1/metrics on a host with no VM against the same scrape with kVms (their vm-labelled
// families: state, CPU, memory, disks, networks, devices), interleaved: the VMs are deleted before
// each arm without them and made again before each arm with them.
void scrape_by_vms(const Transport& transport, const fs::path& scratch, const Settings& settings) {
  Arm none{"/v1/metrics, no VMs", {}, {}, 0};
  Arm some{"/v1/metrics, " + std::to_string(kVms) + " VMs", {}, {}, 0};
  VmSet vms(transport, scratch / "images" / "boot.raw");
  std::vector<std::string> made(kVms);
  for (int i = 0; i < kVms; ++i) made[static_cast<std::size_t>(i)] = "bench-vm-" + std::to_string(i);
  vms.adopt(std::move(made));
  LoadClient client(transport, 1);
  interleave(
      settings,
      [&] {
        if (!vms.empty()) vms.remove();
        none.add(client.run("/v1/metrics", settings.phase));
      },
      [&] {
        if (vms.empty()) vms.make();
        some.add(client.run("/v1/metrics", settings.phase));
      });
  std::printf("  %s, 1 connection\n", transport.name.c_str());
  print_arm(none, nullptr);
  print_arm(some, &none);
  std::fflush(stdout);
}

Settings parse_settings(int argc, char** argv) {
  Settings settings;
  if (argc > 1 && std::strcmp(argv[1], "--quick") == 0) return {1, std::chrono::milliseconds(100)};
  if (argc > 1) settings.rounds = std::max(1, std::atoi(argv[1]));
  if (argc > 2) settings.phase = std::chrono::milliseconds(std::max(10, std::atoi(argv[2])));
  return settings;
}

// One arm alone, as long as asked: what `perf record` should see of one route.
void profile_one(const Transport& transport, const std::string& target, int seconds) {
  LoadClient client(transport, 64);
  Arm arm{target, {}, {}, 0};
  arm.add(client.run(target, std::chrono::seconds(std::max(1, seconds))));
  print_arm(arm, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  const bool profile = argc > 3 && std::strcmp(argv[1], "--profile") == 0;
  const Settings settings = profile ? Settings{} : parse_settings(argc, argv);
  raise_open_files();
  const bench::ScratchDir scratch("api");
  stderr_to_file(scratch.path() / "daemon.log");
  auto daemon = start_daemon(scratch.path());
  if (!daemon.ok()) fail(daemon.error().message);
  create_vms(daemon->transports[0], scratch.path());
  if (profile) {
    profile_one(daemon->transports[0], argv[2], std::atoi(argv[3]));
    daemon->server->stop();
    return 0;
  }

  std::printf("REST API: the daemon's service on test:///default (simulated vela2, %d x %s), its HTTP server\n", kVms,
              kVmShape);
  std::printf("with the /v1 routes (%d network + %d handler threads) on a unix socket and on TCP 127.0.0.1\n",
              daemon->options.network_threads, daemon->options.handler_threads);
  std::printf("(bearer token); the client is one Asio thread over keep-alive connections, closed loop.\n");
  std::printf("%d round%s of %lld ms per arm, arms interleaved; req/s = median over rounds, p50/p99 over every\n",
              settings.rounds, settings.rounds == 1 ? "" : "s", static_cast<long long>(settings.phase.count()));
  std::printf("request (ms); cpu = the process's CPU time (server and client, every thread) per request (us,\n");
  std::printf("'-' where other load shared the process);\n");
  std::printf("rate/flr, p99/flr and cpu/flr = that arm / the first arm of its block (same server, transport\n");
  std::printf("and connections)\n\n");
  std::printf("    %-28s %9s %8s %8s %9s %7s %9s %9s %8s\n", "GET", "req/s", "p50", "p99", "bytes", "cpu", "rate/flr",
              "p99/flr", "cpu/flr");
  for (const auto& transport : daemon->transports) {
    for (const int connections : {1, 64}) throughput(transport, connections, settings);
  }
  std::printf("\nGET /v1/vms while another connection creates (%s) and deletes VMs back to back, against\n",
              kChurnShape);
  std::printf("the same reads with nothing in flight (interleaved); rate/flr and p99/flr = churn / quiet\n");
  for (const int connections : {1, 64}) under_churn(daemon->transports[0], connections, settings);
  std::printf("\nThe health probe (one connection) while %d connections scrape /v1/metrics back to back, against\n",
              kScrapers);
  std::printf("the probe alone (interleaved); rate/flr and p99/flr = flood / alone\n");
  under_scrape_flood(daemon->transports[0], settings);
  std::printf("\nGET /v1/vms with %d stalled connections present (each sent half a request line and waits),\n",
              kStalled);
  std::printf("against the same reads without them (interleaved); rate/flr and p99/flr = stalled / quiet. Over the\n");
  std::printf("unix socket: over TCP one address may hold only 64 (the hostile tests cover that refusal)\n");
  for (const int connections : {1, 8, 64}) under_stall(daemon->transports[0], connections, settings);
  const auto stats = daemon->server->connection_stats();
  std::printf("  the server evicted %llu stalled connections in all (api.limits: %d connections, %d reserve)\n",
              static_cast<unsigned long long>(stats.evicted), daemon->options.limits.max_connections,
              daemon->options.limits.health_reserve);
  std::printf("\nGET /v1/metrics with %d VMs (%s) against the same scrape with none (interleaved: the VMs are\n", kVms,
              kVmShape);
  std::printf("deleted and made again between arms); rate/flr, p99/flr and cpu/flr = %d VMs / none\n", kVms);
  scrape_by_vms(daemon->transports[0], scratch.path(), settings);
  daemon->server->stop();
  return 0;
}
