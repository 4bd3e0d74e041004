// daemon/guest_watch: markers found across any split of the console's bytes; a guest's kernel and up
// phases added to its operation after the operation ended, from a real file appended to as
// virtlogd does and from libvirt's test driver answering the agent's command; a stopped guest let
// go; a watch past its seconds ended with nothing invented.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>

#include "daemon_fixture.hpp"
#include "guest_watch.hpp"
#include "hostagent/virt/hypervisor.hpp"

namespace hostagent::testing {
namespace {

using daemon::GuestWatch;
using daemon::GuestWatchRequest;
using daemon::MarkerScan;

TEST_CASE("a marker is found once, however the bytes are split, and markers in the order they end") {
  const std::string console = "SeaBIOS\r\n[    0.000000] Linux version 6.1.0 (gcc)\r\nbusybox: login: \r\n";
  for (std::size_t split = 0; split <= console.size(); ++split) {
    CAPTURE(split);
    MarkerScan scan({"Linux version", "login:"});
    auto found = scan.feed(console.substr(0, split));
    const auto rest = scan.feed(console.substr(split));
    found.insert(found.end(), rest.begin(), rest.end());
    CHECK(found == std::vector<std::size_t>{0, 1});
    CHECK(scan.feed(console).empty());  // each once: a reboot's second banner is not this boot's
  }
  MarkerScan byte_by_byte({"login:", "Linux version"});
  std::vector<std::size_t> found;
  for (const char c : console) {
    for (const auto index : byte_by_byte.feed(std::string_view(&c, 1))) found.push_back(index);
  }
  CHECK(found == std::vector<std::size_t>{1, 0});
  MarkerScan none({"Linux version", ""});  // no up marker: only the kernel's is looked for
  CHECK(none.feed(console) == std::vector<std::size_t>{0});
}

// An operation that ended, as the create whose guest is watched has by the time its guest boots.
struct Watching {
  Watching() : hypervisor(connect()) { watch = std::make_unique<GuestWatch>(*clock, *hypervisor, operations); }

  static std::unique_ptr<FaultyHypervisor> connect() {
    virt::LibvirtOptions options;
    options.uri = "test:///default";
    auto connection = virt::connect_libvirt(options);
    REQUIRE_MESSAGE(connection.ok(), connection.error().message);
    return std::make_unique<FaultyHypervisor>(std::move(connection).value());
  }

  // test:///default's own domain, "test", runs: the driver answers virDomainGetTime for it.
  GuestWatchRequest request(const std::optional<std::filesystem::path>& console, vmtemplates::BootWatch boot) {
    const auto view = operations.enqueue("create", "test", "", "t");
    operations.start(view.id);
    operations.finish(view.id, ok_status());
    GuestWatchRequest request;
    request.operation = view.id;
    request.vm = "test";
    request.console = console;
    request.watch = std::move(boot);
    request.resumed = clock->steady_now();
    return request;
  }

  // One round of the watch's polling that begins after everything the test did so far: the
  // thread waited for idle, the clock moved past its poll interval, that round waited for.
  void step() {
    const auto idle = watch->await_idle(0, kBound);
    REQUIRE(idle.has_value());
    clock->advance_steady(GuestWatch::kPoll);
    REQUIRE(watch->await_idle(*idle, kBound).has_value());
  }

  // Rounds until the watch has let the VM go (at most a minute by the clock), and one more:
  // nothing is added after.
  void wait_let_go() {
    for (int i = 0; i < 600 && !watch->watched().empty(); ++i) step();
    step();
    CHECK(watch->watched().empty());
  }

  std::vector<service::TimelinePhase> phases(const std::string& id) { return operations.find(id)->timeline; }

  // A bound on each wait for the thread, in real time: a test that hangs fails, none is timed.
  static constexpr std::chrono::seconds kBound{30};
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  daemon::EventHub events;
  daemon::OperationTracker operations{*clock, events};
  std::unique_ptr<FaultyHypervisor> hypervisor;
  std::unique_ptr<GuestWatch> watch;
};

void append(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out << bytes;
  REQUIRE(out.good());
}

TEST_CASE("the console's kernel and up markers become the ended operation's kernel and up phases") {
  TempDir dir;
  const auto console = dir.path() / "vm.log";
  append(console, "the previous boot: Linux version 5.10 ... login:\n");  // appended across boots: not this one
  Watching watching;
  vmtemplates::BootWatch boot;
  boot.agent = false;
  boot.up_marker = "login:";
  auto request = watching.request(console, boot);
  std::error_code ec;
  request.console_from = std::filesystem::file_size(console, ec);
  const auto id = request.operation;
  watching.watch->watch(std::move(request));
  append(console, "SeaBIOS (version 1.16)\r\n[    0.000000] Linux ver");
  watching.step();
  CHECK(watching.phases(id).empty());  // half a marker is not one
  append(console, "sion 6.1.0-57-amd64\r\n");
  append(console, "busybox login: ");
  watching.wait_let_go();
  const auto phases = watching.phases(id);
  REQUIRE(phases.size() == 2);
  CHECK(phases[0].name == "kernel");
  CHECK(phases[0].detail == "console showed \"Linux version\"");
  CHECK(phases[1].name == "up");
  CHECK(phases[1].detail == "console showed \"login:\"");
  CHECK(phases[0].seconds >= 0.2);  // the kernel marker was completed only after three polls
  CHECK(phases[1].seconds >= 0);
  CHECK(watching.operations.find(id)->state == "succeeded");
}

TEST_CASE("a console log rotated under the watch is read again from its start") {
  TempDir dir;
  const auto console = dir.path() / "vm.log";
  Watching watching;
  vmtemplates::BootWatch boot;
  boot.agent = false;
  auto request = watching.request(console, boot);
  request.console_from = 4096;  // the log was that long before the resume, then virtlogd rotated it
  const auto id = request.operation;
  watching.watch->watch(std::move(request));
  append(console, "Linux version 6.1\n");
  watching.wait_let_go();  // the kernel was all there was to see
  const auto phases = watching.phases(id);
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].name == "kernel");
}

TEST_CASE("up is the guest agent answering once it connected, asked again while it does not") {
  TempDir dir;
  Watching watching;
  watching.hypervisor->fail("agent_ping", ErrorCode::unavailable, 2);
  auto request = watching.request(dir.path() / "vm.log", vmtemplates::BootWatch{});
  const auto id = request.operation;
  watching.watch->watch(std::move(request));
  watching.step();
  CHECK(watching.hypervisor->calls("agent_ping") == 0);  // not connected: not asked
  watching.watch->on_event(
      {.name = "test", .uuid = "", .kind = virt::DomainEventKind::agent_connected, .detail = "channel"});
  watching.wait_let_go();
  CHECK(watching.hypervisor->calls("agent_ping") == 3);  // two refused, a second apart; the third answered
  const auto phases = watching.phases(id);
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].name == "up");
  CHECK(phases[0].detail == "guest agent answered");
  // Asked a round after it connected, then each kPingEvery by the clock: up two pings later.
  CHECK(phases[0].seconds >= 2 * std::chrono::duration<double>(GuestWatch::kPingEvery).count());
  CHECK(phases[0].seconds <= 2 * std::chrono::duration<double>(GuestWatch::kPingEvery + GuestWatch::kPoll).count() +
                                 std::chrono::duration<double>(GuestWatch::kPoll).count());
}

TEST_CASE("a guest that stops, or is not seen up in its seconds, is let go with nothing added") {
  TempDir dir;
  Watching watching;
  auto stopped = watching.request(dir.path() / "stopped.log", vmtemplates::BootWatch{});
  const auto stopped_id = stopped.operation;
  watching.watch->watch(std::move(stopped));
  watching.step();
  watching.watch->on_event({.name = "test", .uuid = "", .kind = virt::DomainEventKind::stopped, .detail = "destroyed"});
  watching.wait_let_go();
  CHECK(watching.phases(stopped_id).empty());

  vmtemplates::BootWatch brief;
  brief.seconds = 1;
  auto silent = watching.request(dir.path() / "silent.log", brief);
  const auto silent_id = silent.operation;
  watching.watch->watch(std::move(silent));
  watching.wait_let_go();
  CHECK(watching.phases(silent_id).empty());
  CHECK(watching.hypervisor->calls("agent_ping") == 0);
}

}  // namespace
}  // namespace hostagent::testing
