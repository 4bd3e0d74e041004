// Losing libvirtd and getting it back: the Hypervisor reports the loss, fails calls fast while it is
// gone, reconnects on its own, and finds running domains where they were (QEMU outlives libvirtd).
#include <doctest/doctest.h>

#include "libvirtd_support.hpp"
#include "virt_fixture.hpp"

namespace hostagent::testing {
namespace {

using virt::ConnectionEvent;
using virt::DomainEventKind;
using virt::DomainState;

constexpr std::chrono::milliseconds kReconnect{500};

// Starts libvirtd again if a test stopped it and then failed before starting it.
struct LibvirtdRestorer {
  bool stopped = false;
  ~LibvirtdRestorer() {
    if (!stopped) return;
    try {
      restart_libvirtd();
    } catch (...) {  // a failed REQUIRE inside; the test already failed
    }
  }
};

}  // namespace

TEST_CASE("after libvirtd restarts the hypervisor reconnects and the running domain is still there") {
  const auto uri = libvirtd_uri_or_skip();
  if (!uri) return;
  auto hv = connect_hypervisor(*uri, kReconnect);
  EventRecorder events;
  events.attach(*hv);
  const std::string name = unique_name("reconnect");
  const DomainCleanup cleanup{*uri, name};
  REQUIRE(hv->define(domain_xml({.name = name, .type = "qemu", .machine = "q35", .template_name = "r"})).ok());
  const auto started = hv->start(name);
  REQUIRE_MESSAGE(started.ok(), started.error().message);

  restart_libvirtd();
  REQUIRE(events.wait_connection(ConnectionEvent::lost));
  REQUIRE(events.wait_connection(ConnectionEvent::connected));
  CHECK(hv->connected());

  auto summary = hv->lookup(name);
  REQUIRE_MESSAGE(summary.ok(), summary.error().message);
  CHECK(summary->state == DomainState::running);
  CHECK(summary->metadata.has_value());

  // Events were registered again on the new connection. (A domain that was running is the wrong
  // witness: libvirtd reattaches to its QEMU in the background after a restart, and a destroy that
  // races that reattach stops the domain without a lifecycle event, libvirt 9.0.)
  const std::string witness = unique_name("witness");
  const DomainCleanup witness_cleanup{*uri, witness};
  REQUIRE(hv->define(domain_xml({.name = witness, .type = "qemu", .machine = "q35"})).ok());
  CHECK(events.wait_domain(witness, DomainEventKind::defined).has_value());
  REQUIRE(hv->undefine(witness).ok());
  CHECK(events.wait_domain(witness, DomainEventKind::undefined).has_value());

  REQUIRE(hv->destroy(name).ok());
  CHECK(hv->lookup(name)->state == DomainState::shut_off);
  CHECK(hv->undefine(name).ok());
}

TEST_CASE("while libvirtd is stopped calls fail fast with unavailable, and work again once it is back") {
  const auto uri = libvirtd_uri_or_skip();
  if (!uri) return;
  auto hv = connect_hypervisor(*uri, kReconnect);
  EventRecorder events;
  events.attach(*hv);
  LibvirtdRestorer restorer;

  stop_libvirtd();
  restorer.stopped = true;
  REQUIRE(events.wait_connection(ConnectionEvent::lost));
  CHECK_FALSE(hv->connected());
  auto lookup = hv->lookup("anything");
  REQUIRE_FALSE(lookup.ok());
  CHECK(lookup.error().code == ErrorCode::unavailable);
  INFO(lookup.error().message);
  CHECK(lookup.error().message.find("libvirt at " + *uri + " is not connected; reconnecting every") !=
        std::string::npos);
  CHECK(hv->list().error().code == ErrorCode::unavailable);
  CHECK(hv->undefine("anything").error().code == ErrorCode::unavailable);  // idempotent, but not blind

  restart_libvirtd();
  restorer.stopped = false;
  REQUIRE(events.wait_connection(ConnectionEvent::connected));
  const auto listed = hv->list();
  CHECK_MESSAGE(listed.ok(), listed.error().message);
}

}  // namespace hostagent::testing
