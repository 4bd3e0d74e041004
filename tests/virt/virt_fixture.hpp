// Shared by the virt suites: domain XML for tests, and a recorder for the Hypervisor's events that
// a test waits on (with a generous timeout that only keeps a broken build from hanging).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/virt/hypervisor.hpp"

namespace hostagent::testing {

// libvirt's in-process test driver with its default host (src/test/test_driver.c), shared by every
// connection in the process.
inline constexpr const char* kTestUri = "test:///default";
inline constexpr const char* kMetadataNamespace = "https://hostagent.dev/xmlns/domain/1";
inline constexpr std::chrono::seconds kEventTimeout{60};

struct TestDomain {
  std::string name{};
  std::string type = "test";    // "test" for test:///default, "qemu" for TCG under libvirtd
  std::string machine{};        // "q35" for qemu
  std::string template_name{};  // empty: no hostagent metadata
  int memory_mib = 64;
};
// <domain> built with pugixml: 1 vCPU, no disk, hostagent's metadata element when template_name is set.
std::string domain_xml(const TestDomain& domain);

// connect_libvirt with the test namespace; fails the test (REQUIRE) when it does not connect.
std::unique_ptr<virt::Hypervisor> connect_hypervisor(
    const std::string& uri, std::chrono::milliseconds reconnect_interval = std::chrono::seconds(1));

// A name no other test (or earlier run) uses: "hostagent-virt-TAG-PID".
std::string unique_name(const std::string& tag);

class EventRecorder {
 public:
  EventRecorder();
  void attach(virt::Hypervisor& hypervisor);
  // The first recorded event for `name` of `kind` (waiting up to kEventTimeout), or nullopt.
  std::optional<virt::DomainEvent> wait_domain(const std::string& name, virt::DomainEventKind kind);
  // True once `event` was recorded (waiting up to timeout).
  bool wait_connection(virt::ConnectionEvent event, std::chrono::seconds timeout = kEventTimeout);
  std::vector<virt::DomainEvent> domain_events(const std::string& name) const;

 private:
  struct State {
    mutable std::mutex mutex;
    std::condition_variable cv;
    std::vector<virt::DomainEvent> domain;
    std::vector<virt::ConnectionEvent> connection;
  };
  std::shared_ptr<State> state_;
};

}  // namespace hostagent::testing
