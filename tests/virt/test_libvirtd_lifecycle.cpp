// A QEMU (TCG) domain through the machine's real libvirtd: 64 MiB, 1 vCPU, no disk, q35. Without a
// disk it sits in SeaBIOS, which is all a lifecycle needs.
#include <doctest/doctest.h>

#include "libvirtd_support.hpp"
#include "virt_fixture.hpp"

namespace hostagent::testing {
namespace {

using virt::DomainEventKind;
using virt::DomainState;

}  // namespace

TEST_CASE("a qemu domain is defined, started, destroyed and undefined, with its events") {
  const auto uri = libvirtd_uri_or_skip();
  if (!uri) return;
  auto hv = connect_hypervisor(*uri);
  EventRecorder events;
  events.attach(*hv);
  const std::string name = unique_name("lifecycle");
  const DomainCleanup cleanup{*uri, name};

  auto uuid = hv->define(domain_xml({.name = name, .type = "qemu", .machine = "q35", .template_name = "lifecycle"}));
  REQUIRE_MESSAGE(uuid.ok(), uuid.error().message);
  CHECK(events.wait_domain(name, DomainEventKind::defined).has_value());

  const auto started = hv->start(name);
  REQUIRE_MESSAGE(started.ok(), started.error().message);
  const auto started_event = events.wait_domain(name, DomainEventKind::started);
  REQUIRE(started_event.has_value());
  CHECK(started_event->detail == "booted");
  CHECK(started_event->uuid == uuid.value());
  auto running = hv->lookup(name);
  REQUIRE_MESSAGE(running.ok(), running.error().message);
  CHECK(running->state == DomainState::running);
  REQUIRE(running->metadata.has_value());  // read from the live definition
  CHECK(running->metadata->find(R"(template name="lifecycle")") != std::string::npos);

  // QEMU started paused: its process is up (the domain is active) and its vCPUs have not run.
  REQUIRE(hv->destroy(name).ok());
  REQUIRE(events.wait_domain(name, DomainEventKind::stopped).has_value());
  const auto paused = hv->start_paused(name);
  REQUIRE_MESSAGE(paused.ok(), paused.error().message);
  CHECK(events.wait_domain(name, DomainEventKind::suspended).has_value());
  CHECK(hv->lookup(name)->state == DomainState::paused);
  const auto resumed = hv->resume(name);
  REQUIRE_MESSAGE(resumed.ok(), resumed.error().message);
  CHECK(events.wait_domain(name, DomainEventKind::resumed).has_value());
  CHECK(hv->lookup(name)->state == DomainState::running);
  CHECK(hv->resume(name).ok());  // running already

  auto again = hv->start(name);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::conflict);

  REQUIRE(hv->destroy(name).ok());
  const auto stopped = events.wait_domain(name, DomainEventKind::stopped);
  REQUIRE(stopped.has_value());
  CHECK(stopped->detail == "destroyed");
  CHECK(hv->lookup(name)->state == DomainState::shut_off);
  const auto destroyed_again = hv->destroy(name);
  CHECK_MESSAGE(destroyed_again.ok(), destroyed_again.error().message);
  const auto shutdown_stopped = hv->shutdown(name);
  CHECK_MESSAGE(shutdown_stopped.ok(), shutdown_stopped.error().message);

  const auto undefined = hv->undefine(name);  // QEMU takes every undefine flag
  REQUIRE_MESSAGE(undefined.ok(), undefined.error().message);
  CHECK(events.wait_domain(name, DomainEventKind::undefined).has_value());
  CHECK(hv->lookup(name).error().code == ErrorCode::not_found);
  CHECK(hv->undefine(name).ok());
}

TEST_CASE("libvirtd without a driver for a URI's scheme refuses it as invalid_argument at once") {
  if (!libvirtd_uri_or_skip()) return;
  virt::LibvirtOptions options;
  options.uri = "nosuchdriver:///x";
  auto hv = virt::connect_libvirt(options);  // a retry until connect_timeout would show as a slow test
  REQUIRE_FALSE(hv.ok());
  CHECK(hv.error().code == ErrorCode::invalid_argument);
  CHECK(hv.error().message.find("nosuchdriver:///x") != std::string::npos);
}

TEST_CASE("libvirtd refuses a qemu domain XML that does not validate, as invalid_argument") {
  const auto uri = libvirtd_uri_or_skip();
  if (!uri) return;
  auto hv = connect_hypervisor(*uri);
  const std::string name = unique_name("invalid");
  const DomainCleanup cleanup{*uri, name};
  std::string xml = domain_xml({.name = name, .type = "qemu", .machine = "q35"});
  xml.replace(xml.find("<vcpu>"), 6, "<vcpus>");  // unbalanced: libvirt's XML parser says where
  auto refused = hv->define(xml);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(refused.error().message.find("define domain") == 0);
}

// The machine's libvirtd and QEMU: the install scripts' stack (README, "Two stacks"), at least the
// oldest the packages declare.
TEST_CASE("libvirtd reports its own version and its QEMU's, no older than Debian 12's") {
  const auto uri = libvirtd_uri_or_skip();
  if (!uri) return;
  auto hv = connect_hypervisor(*uri);
  const auto versions = hv->versions();
  REQUIRE_MESSAGE(versions.ok(), versions.error().message);
  MESSAGE("libvirt " << versions->libvirt.text() << ", QEMU " << versions->qemu.text());
  CHECK(versions->libvirt >= virt::Version{9, 0, 0});
  CHECK(versions->qemu >= virt::Version{7, 2, 0});
  CHECK(versions->qemu != virt::Version{0, 0, 2});  // not the test driver's
}

}  // namespace hostagent::testing
