// Lifecycle events from libvirt's test:///default driver, delivered on the event loop thread.
#include <doctest/doctest.h>

#include <thread>

#include "virt_fixture.hpp"

namespace hostagent::testing {
namespace {

using virt::DomainEventKind;

}  // namespace

TEST_CASE("define, start, destroy and undefine each report a lifecycle event with its detail") {
  auto hv = connect_hypervisor(kTestUri);
  EventRecorder events;
  events.attach(*hv);
  const std::string name = unique_name("events");

  auto uuid = hv->define(domain_xml({.name = name, .template_name = "x"}));
  REQUIRE_MESSAGE(uuid.ok(), uuid.error().message);
  const auto defined = events.wait_domain(name, DomainEventKind::defined);
  REQUIRE(defined.has_value());
  CHECK(defined->detail == "added");
  CHECK(defined->uuid == uuid.value());

  REQUIRE(hv->start(name).ok());
  const auto started = events.wait_domain(name, DomainEventKind::started);
  REQUIRE(started.has_value());
  CHECK(started->detail == "booted");

  REQUIRE(hv->destroy(name).ok());
  const auto stopped = events.wait_domain(name, DomainEventKind::stopped);
  REQUIRE(stopped.has_value());
  CHECK(stopped->detail == "destroyed");

  REQUIRE(hv->undefine(name).ok());
  const auto undefined = events.wait_domain(name, DomainEventKind::undefined);
  REQUIRE(undefined.has_value());
  CHECK(undefined->detail == "removed");

  // One event per call, in the order of the calls: the second undefine was a no-op.
  REQUIRE(hv->undefine(name).ok());
  const auto all = events.domain_events(name);
  REQUIRE(all.size() == 4);
  CHECK(all[0].kind == DomainEventKind::defined);
  CHECK(all[1].kind == DomainEventKind::started);
  CHECK(all[2].kind == DomainEventKind::stopped);
  CHECK(all[3].kind == DomainEventKind::undefined);
}

// What QEMU's paused start and a resume report, on the test driver's emulation of it.
TEST_CASE("a paused start reports started, suspended and, on resume, resumed") {
  auto hv = connect_hypervisor(kTestUri);
  EventRecorder events;
  events.attach(*hv);
  const std::string name = unique_name("paused-event");
  REQUIRE(hv->define(domain_xml({.name = name})).ok());
  REQUIRE(hv->start_paused(name).ok());
  REQUIRE(hv->resume(name).ok());
  REQUIRE(events.wait_domain(name, DomainEventKind::resumed).has_value());
  const auto all = events.domain_events(name);
  REQUIRE(all.size() == 4);
  CHECK(all[1].kind == DomainEventKind::started);
  CHECK(all[1].detail == "booted");
  CHECK(all[2].kind == DomainEventKind::suspended);
  CHECK(all[2].detail == "paused");
  CHECK(all[3].kind == DomainEventKind::resumed);
  CHECK(all[3].detail == "unpaused");
  REQUIRE(hv->destroy(name).ok());
  REQUIRE(hv->undefine(name).ok());
}

TEST_CASE("a graceful shutdown reports stopped with detail shutdown") {
  auto hv = connect_hypervisor(kTestUri);
  EventRecorder events;
  events.attach(*hv);
  const std::string name = unique_name("shutdown-event");
  REQUIRE(hv->define(domain_xml({.name = name})).ok());
  REQUIRE(hv->start(name).ok());
  REQUIRE(hv->shutdown(name).ok());
  const auto stopped = events.wait_domain(name, DomainEventKind::stopped);
  REQUIRE(stopped.has_value());
  CHECK(stopped->detail == "shutdown");
  REQUIRE(hv->undefine(name).ok());
}

TEST_CASE("two hypervisors in one process both receive events from the shared loop") {
  auto first = connect_hypervisor(kTestUri);
  auto second = connect_hypervisor(kTestUri);
  EventRecorder first_events;
  EventRecorder second_events;
  first_events.attach(*first);
  second_events.attach(*second);
  const std::string name = unique_name("two");
  REQUIRE(first->define(domain_xml({.name = name})).ok());
  CHECK(first_events.wait_domain(name, DomainEventKind::defined).has_value());
  CHECK(second_events.wait_domain(name, DomainEventKind::defined).has_value());
  REQUIRE(first->undefine(name).ok());
}

TEST_CASE("events still arrive after every hypervisor was destroyed and a new one made") {
  // The last Hypervisor stops the process's event loop; the next one must start it again.
  for (int round = 0; round < 3; ++round) {
    auto hv = connect_hypervisor(kTestUri);
    EventRecorder events;
    events.attach(*hv);
    const std::string name = unique_name("round" + std::to_string(round));
    REQUIRE(hv->define(domain_xml({.name = name})).ok());
    CHECK(events.wait_domain(name, DomainEventKind::defined).has_value());
    REQUIRE(hv->undefine(name).ok());
  }
}

TEST_CASE("subscribe replaces the previous sinks") {
  auto hv = connect_hypervisor(kTestUri);
  EventRecorder old_sink;
  EventRecorder new_sink;
  old_sink.attach(*hv);
  new_sink.attach(*hv);
  const std::string name = unique_name("resubscribe");
  REQUIRE(hv->define(domain_xml({.name = name})).ok());
  REQUIRE(hv->undefine(name).ok());
  // Both events reached the new sink; anything for the old one would have been delivered first.
  REQUIRE(new_sink.wait_domain(name, DomainEventKind::undefined).has_value());
  CHECK(old_sink.domain_events(name).empty());
}

TEST_CASE("hypervisors made and destroyed on several threads at once keep working") {
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &ok] {
      virt::LibvirtOptions options;
      options.uri = kTestUri;
      options.metadata_namespace = kMetadataNamespace;
      for (int i = 0; i < 5; ++i) {
        auto hv = virt::connect_libvirt(options);
        if (!hv.ok() || !hv.value()->list().ok()) return;
      }
      ok[static_cast<std::size_t>(t)] = 1;
    });
  }
  for (auto& thread : threads) thread.join();
  for (const int each : ok) CHECK(each == 1);
}

}  // namespace hostagent::testing
