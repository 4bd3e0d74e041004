// connect_libvirt: what a bad URI, an absent libvirtd and a good connection give.
#include <doctest/doctest.h>
#include <libvirt/libvirt.h>

#include "virt_fixture.hpp"

namespace hostagent::testing {

// A URI with a scheme but no driver ("nosuchdriver:///x") is libvirtd's to refuse, so it is
// test_libvirtd_lifecycle's: without a daemon the client library cannot tell it from a daemon that
// is down.
TEST_CASE("connect_libvirt with a URI that does not parse is invalid_argument at once") {
  virt::LibvirtOptions options;
  options.uri = "::bad";
  auto hv = virt::connect_libvirt(options);  // the default 30 s timeout would show as a slow test
  REQUIRE_FALSE(hv.ok());
  CHECK(hv.error().code == ErrorCode::invalid_argument);
  CHECK(hv.error().message.find("::bad") != std::string::npos);
}

TEST_CASE("connect_libvirt to a socket nobody listens on is unavailable once connect_timeout passed") {
  virt::LibvirtOptions options;
  options.uri = "qemu+unix:///system?socket=/nonexistent/hostagent-test/libvirt-sock";
  options.connect_timeout = std::chrono::milliseconds(600);
  auto hv = virt::connect_libvirt(options);
  REQUIRE_FALSE(hv.ok());
  CHECK(hv.error().code == ErrorCode::unavailable);
  INFO(hv.error().message);
  CHECK(hv.error().message.find("did not answer") != std::string::npos);
  CHECK(hv.error().message.find("libvirt-sock") != std::string::npos);
}

TEST_CASE("connect_libvirt refuses an empty URI and a zero reconnect interval") {
  virt::LibvirtOptions options;
  CHECK(virt::connect_libvirt(options).error().code == ErrorCode::invalid_argument);
  options.uri = "test:///default";
  options.reconnect_interval = std::chrono::milliseconds(0);
  CHECK(virt::connect_libvirt(options).error().code == ErrorCode::invalid_argument);
}

TEST_CASE("a hypervisor on test:///default is connected") {
  auto hv = connect_hypervisor("test:///default");
  CHECK(hv->connected());
}

// The test driver runs in-process: libvirt's version is the library's (LIBVIR_VERSION_NUMBER, as
// virGetVersion reports it); its "hypervisor" version is the driver's own, a packed 2: 0.0.2
// (test_driver.c's testConnectGetVersion).
TEST_CASE("versions: libvirt's and the hypervisor's, split from libvirt's packed numbers") {
  auto hv = connect_hypervisor("test:///default");
  const auto versions = hv->versions();
  REQUIRE_MESSAGE(versions.ok(), versions.error().message);
  unsigned long library = 0;
  REQUIRE(virGetVersion(&library, nullptr, nullptr) == 0);
  CHECK(versions->libvirt == virt::Version::from_libvirt(library));
  CHECK(versions->qemu == virt::Version{0, 0, 2});
  CHECK(virt::Version::from_libvirt(10000002).text() == "10.0.2");
  CHECK(virt::Version::from_libvirt(9000000) < virt::Version::from_libvirt(10000002));
}

}  // namespace hostagent::testing
