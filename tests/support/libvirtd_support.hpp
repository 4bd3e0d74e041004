// Test helpers for the suites that drive the machine's real libvirtd (LIBVIRTD in CMake): find it
// or skip, restart or stop it through scripts/libvirtd.sh, and clean up what a test made there.
#pragma once

#include <optional>
#include <string>

namespace hostagent::testing {

// The URI of a libvirtd that answers ($HOSTAGENT_LIBVIRTD_URI, default qemu:///system), trying for
// up to 60 s (its first start probes QEMU). When none answers: with HOSTAGENT_REQUIRE_LIBVIRTD=1 the
// test fails, saying how to start one; otherwise it prints "SKIPPED: ..." and returns nullopt.
std::optional<std::string> libvirtd_uri_or_skip();

// scripts/libvirtd.sh restart; fails the test when the script fails. Returns once the new libvirtd
// is forked, not once it answers (clients retry).
void restart_libvirtd();
// scripts/libvirtd.sh stop; fails the test when the script fails. restart_libvirtd() starts it again.
void stop_libvirtd();

// Destroys and undefines a domain through its own connection, ignoring every failure: for scope
// guards, which must clean up even when the Hypervisor under test is broken or disconnected.
void remove_domain(const std::string& uri, const std::string& name);
// remove_domain on scope exit.
struct DomainCleanup {
  std::string uri;
  std::string name;
  ~DomainCleanup() { remove_domain(uri, name); }
};
// Destroys (and undefines, if persistent) a storage pool, likewise.
void remove_pool(const std::string& uri, const std::string& name);

}  // namespace hostagent::testing
