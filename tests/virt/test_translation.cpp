// The module's private tables: libvirt error codes, lifecycle details, domain states, and reading a
// backing image's format and size.
#include <libvirt/virterror.h>

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <fstream>

#include "backing_image.hpp"
#include "domain_events.hpp"
#include "libvirt_error.hpp"
#include "libvirt_hypervisor.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

using virt::detail::LibvirtError;

ErrorCode code_of(int code, int domain = VIR_FROM_QEMU) {
  return virt::detail::classify(LibvirtError{code, domain, "m"});
}

}  // namespace

TEST_CASE("libvirt error codes become hostagent error codes") {
  CHECK(code_of(VIR_ERR_NO_DOMAIN) == ErrorCode::not_found);
  CHECK(code_of(VIR_ERR_NO_STORAGE_POOL) == ErrorCode::not_found);
  CHECK(code_of(VIR_ERR_NO_STORAGE_VOL) == ErrorCode::not_found);
  CHECK(code_of(VIR_ERR_XML_ERROR) == ErrorCode::invalid_argument);
  CHECK(code_of(VIR_ERR_XML_DETAIL) == ErrorCode::invalid_argument);
  CHECK(code_of(VIR_ERR_INVALID_ARG) == ErrorCode::invalid_argument);
  CHECK(code_of(VIR_ERR_CONFIG_UNSUPPORTED) == ErrorCode::invalid_argument);
  CHECK(code_of(VIR_ERR_OPERATION_INVALID) == ErrorCode::conflict);
  CHECK(code_of(VIR_ERR_STORAGE_VOL_EXIST) == ErrorCode::conflict);
  CHECK(code_of(VIR_ERR_NO_CONNECT) == ErrorCode::unavailable);
  CHECK(code_of(VIR_ERR_INVALID_CONN) == ErrorCode::unavailable);
  CHECK(code_of(VIR_ERR_SYSTEM_ERROR, VIR_FROM_RPC) == ErrorCode::unavailable);  // "Cannot write data"
  CHECK(code_of(VIR_ERR_INTERNAL_ERROR, VIR_FROM_RPC) == ErrorCode::unavailable);
  CHECK(code_of(VIR_ERR_SYSTEM_ERROR, VIR_FROM_STORAGE) == ErrorCode::internal);
  CHECK(code_of(VIR_ERR_OPERATION_FAILED) == ErrorCode::internal);
}

TEST_CASE("a translated error says what we were doing and what libvirt said") {
  const Error error = virt::detail::to_error(
      LibvirtError{VIR_ERR_OPERATION_INVALID, VIR_FROM_QEMU, "Requested operation is not valid: domain is not running"},
      "reboot domain vm1");
  CHECK(error.code == ErrorCode::conflict);
  CHECK(error.message == "reboot domain vm1: Requested operation is not valid: domain is not running");
}

TEST_CASE("lifecycle events are worded") {
  using virt::DomainEventKind;
  using virt::detail::event_detail;
  using virt::detail::event_kind;
  CHECK(event_kind(VIR_DOMAIN_EVENT_STARTED) == DomainEventKind::started);
  CHECK(event_kind(VIR_DOMAIN_EVENT_STOPPED) == DomainEventKind::stopped);
  CHECK(event_kind(VIR_DOMAIN_EVENT_CRASHED) == DomainEventKind::crashed);
  CHECK(event_kind(VIR_DOMAIN_EVENT_PMSUSPENDED) == DomainEventKind::other);
  CHECK(event_kind(99) == DomainEventKind::other);
  CHECK(event_detail(VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STARTED_BOOTED) == "booted");
  CHECK(event_detail(VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_DESTROYED) == "destroyed");
  CHECK(event_detail(VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN) == "shutdown");
  CHECK(event_detail(VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_CRASHED) == "crashed");
  CHECK(event_detail(VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_FAILED) == "failed");
  CHECK(event_detail(VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_MIGRATED) == "migrated");
  CHECK(event_detail(VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_IOERROR) == "I/O error");
  CHECK(event_detail(VIR_DOMAIN_EVENT_RESUMED, VIR_DOMAIN_EVENT_RESUMED_POSTCOPY_FAILED) == "postcopy failed");
  CHECK(event_detail(VIR_DOMAIN_EVENT_CRASHED, VIR_DOMAIN_EVENT_CRASHED_PANICKED) == "panicked");
  CHECK(event_detail(VIR_DOMAIN_EVENT_STOPPED, 42) == "unknown");
  CHECK(event_detail(VIR_DOMAIN_EVENT_STOPPED, -1) == "unknown");
  CHECK(virt::to_string(DomainEventKind::shutdown) == "shutdown");
}

TEST_CASE("libvirt domain states map onto DomainState") {
  using virt::DomainState;
  using virt::detail::map_state;
  CHECK(map_state(VIR_DOMAIN_RUNNING) == DomainState::running);
  CHECK(map_state(VIR_DOMAIN_BLOCKED) == DomainState::running);
  CHECK(map_state(VIR_DOMAIN_PAUSED) == DomainState::paused);
  CHECK(map_state(VIR_DOMAIN_SHUTDOWN) == DomainState::shutting_down);
  CHECK(map_state(VIR_DOMAIN_SHUTOFF) == DomainState::shut_off);
  CHECK(map_state(VIR_DOMAIN_CRASHED) == DomainState::crashed);
  CHECK(map_state(VIR_DOMAIN_PMSUSPENDED) == DomainState::suspended);
  CHECK(map_state(VIR_DOMAIN_NOSTATE) == DomainState::other);
  CHECK(virt::to_string(DomainState::shut_off) == "shut_off");
}

TEST_CASE("backing image inspection refuses empty and truncated images") {
  const TempDir dir;
  const auto empty = dir.path() / "empty.img";
  std::ofstream(empty).close();
  auto empty_result = virt::detail::inspect_backing_image(empty.string());
  REQUIRE_FALSE(empty_result.ok());
  CHECK(empty_result.error().code == ErrorCode::invalid_argument);

  const auto truncated = dir.path() / "truncated.qcow2";
  std::ofstream(truncated, std::ios::binary) << std::string("QFI\xfb\0\0\0\3", 8);  // magic, version 3
  auto truncated_result = virt::detail::inspect_backing_image(truncated.string());
  REQUIRE_FALSE(truncated_result.ok());
  CHECK(truncated_result.error().code == ErrorCode::parse_error);

  const auto small = dir.path() / "small.img";
  std::ofstream(small, std::ios::binary) << "QFI";  // three bytes: too short for the magic, so raw
  auto small_result = virt::detail::inspect_backing_image(small.string());
  REQUIRE(small_result.ok());
  CHECK(small_result->format == "raw");
  CHECK(small_result->virtual_size == 3);
}

// Issue 43, defect 5: a FIFO swapped in for the image after the request was checked hung the
// worker that opened it (and the VM's devices with it) for good. Refused at once now, as is a
// character device.
TEST_CASE("backing image inspection refuses a FIFO and a device at once, never waiting on them") {
  const TempDir dir;
  const auto fifo = dir.path() / "image.raw";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto from_fifo = virt::detail::inspect_backing_image(fifo.string());
  REQUIRE_FALSE(from_fifo.ok());
  CHECK(from_fifo.error().code == ErrorCode::invalid_argument);
  CHECK_MESSAGE(from_fifo.error().message.find("is a FIFO, not a regular file or block device") != std::string::npos,
                from_fifo.error().message);
  const auto zero = virt::detail::inspect_backing_image("/dev/zero");
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message.find("is a character device") != std::string::npos);
}

TEST_CASE("overlay volume XML names its backing file and formats") {
  const std::string xml = virt::detail::overlay_volume_xml("vm1 <&> root.qcow2", "/images/base.qcow2", {"qcow2", 1234});
  CHECK(xml.find("<name>vm1 &lt;&amp;&gt; root.qcow2</name>") != std::string::npos);
  CHECK(xml.find(R"(<capacity unit="bytes">1234</capacity>)") != std::string::npos);
  CHECK(xml.find("<path>/images/base.qcow2</path>") != std::string::npos);
}

}  // namespace hostagent::testing
