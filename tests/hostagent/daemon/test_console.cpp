// A VM's serial console through the service, on test:/// with the hypervisor double serving the
// consoles libvirt's test driver lacks: one session at a time (the second refused, naming the
// first, or taking it over), the guest's output bounded for a client that falls behind, input
// reaching the guest, and the console free again once a session goes.
#include <doctest/doctest.h>

#include "daemon_fixture.hpp"

namespace hostagent::testing {
namespace {

// What a session's wake says: called, from any thread.
struct Woken {
  std::mutex mutex;
  std::condition_variable changed;
  bool woken = false;

  std::function<void()> callback() {
    return [this] {
      const std::lock_guard lock(mutex);
      woken = true;
      changed.notify_all();
    };
  }
};

// A started service on test:/// whose hypervisor double serves consoles, with one running VM, vm1.
struct ConsoleHost {
  DaemonFixture fixture;
  FaultyHypervisor* hypervisor = nullptr;
  std::unique_ptr<service::VmService> service = started(fixture, &hypervisor);

  ConsoleHost() {
    hypervisor->serve_consoles();
    REQUIRE(create_vm(*service, fixture.request("vm1", kOneGpu)).ok());
  }
};

TEST_CASE("one console session per VM: output and input flow, a second is refused, take_over ends the first") {
  ConsoleHost host;

  auto first = host.service->open_console(vm_name("vm1"), false, "uid:1000");
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  Woken woken;
  (*first)->wait(woken.callback());
  CHECK_FALSE(woken.woken);  // nothing yet
  host.hypervisor->console_output("vm1", "login: ");
  CHECK(woken.woken);  // the guest's output woke the client
  CHECK((*first)->take() == "login: ");
  CHECK((*first)->take().empty());
  CHECK((*first)->put("root\r") == 5);
  CHECK(host.hypervisor->console_input("vm1") == "root\r");

  // A second client is refused, told who holds it and how to take it.
  const auto second = host.service->open_console(vm_name("vm1"), false, "uid:1001");
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == ErrorCode::conflict);
  CHECK(second.error().message.find("uid:1000") != std::string::npos);
  CHECK(second.error().message.find("take_over=true") != std::string::npos);
  CHECK_FALSE((*first)->ended());

  // Taking it over ends the first session, with who took it; the new one is libvirt's forced open.
  auto third = host.service->open_console(vm_name("vm1"), true, "uid:1002");
  REQUIRE_MESSAGE(third.ok(), third.error().message);
  CHECK((*first)->ended() == std::optional<std::string>("taken over by uid:1002"));
  CHECK((*first)->put("x") == 0);
  CHECK(host.hypervisor->forced_console_opens() == 1);
  host.hypervisor->console_output("vm1", "# ");
  CHECK((*third)->take() == "# ");

  // Once the session goes (its client left), the next open needs no take-over, and does not force.
  third->reset();
  first->reset();
  auto fourth = host.service->open_console(vm_name("vm1"), false, "uid:1003");
  REQUIRE_MESSAGE(fourth.ok(), fourth.error().message);
  CHECK(host.hypervisor->forced_console_opens() == 1);
}

TEST_CASE("a client that falls behind loses the oldest output, told how much, and the guest never waits") {
  ConsoleHost host;
  auto session = host.service->open_console(vm_name("vm1"), false, "uid:0");
  REQUIRE_MESSAGE(session.ok(), session.error().message);

  const std::string line(1000, 'a');
  for (int i = 0; i < 300; ++i) host.hypervisor->console_output("vm1", line);  // 300,000 bytes, none taken
  host.hypervisor->console_output("vm1", "the end");
  const std::string out = (*session)->take();
  const std::string dropped = std::to_string(300 * 1000 + 7 - service::kConsoleOutputBytes);
  CHECK_MESSAGE(out.starts_with("\r\n[hostagent: " + dropped + " bytes of the console's output were dropped"),
                out.substr(0, 120));
  CHECK(out.ends_with("the end"));
  CHECK(out.size() < service::kConsoleOutputBytes + 200);
  CHECK((*session)->take().empty());  // said once
}

TEST_CASE("a console of a VM that is not running, or not hostagent's, is refused") {
  ConsoleHost host;
  REQUIRE(stop_vm(*host.service, vm_name("vm1"), true).ok());
  const auto stopped = host.service->open_console(vm_name("vm1"), false, "uid:0");
  REQUIRE_FALSE(stopped.ok());
  CHECK(stopped.error().code == ErrorCode::conflict);
  CHECK(stopped.error().message.find("not running") != std::string::npos);
  CHECK(host.service->open_console(vm_name("nope"), false, "uid:0").error().code == ErrorCode::not_found);
  // The refusal held nothing: once running, the console opens without a take-over.
  REQUIRE(start_vm(*host.service, vm_name("vm1")).ok());
  CHECK(host.service->open_console(vm_name("vm1"), false, "uid:0").ok());
}

TEST_CASE("libvirt's test driver has no consoles: unsupported, saying so") {
  DaemonFixture fixture;
  auto service = started(fixture);
  REQUIRE(create_vm(*service, fixture.request("vm1", kOneGpu)).ok());
  const auto session = service->open_console(vm_name("vm1"), false, "uid:0");
  REQUIRE_FALSE(session.ok());
  CHECK(session.error().code == ErrorCode::unsupported);
  CHECK(session.error().message.find("virDomainOpenConsole") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::testing
