// The private bus and the stand-in manager: sd-bus on the test's side, as systemd uses it.
#include "bus_stand_in.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <fstream>

#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBusConfig = R"(<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=@PATH@</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
)";

// Reads the a(sv) properties of SetUnitProperties into the call.
int read_properties(sd_bus_message* message, RecordedCall& call) {
  int rc = sd_bus_message_enter_container(message, 'a', "(sv)");
  if (rc < 0) return rc;
  while ((rc = sd_bus_message_enter_container(message, 'r', "sv")) > 0) {
    const char* name = nullptr;
    if ((rc = sd_bus_message_read(message, "s", &name)) < 0) return rc;
    call.properties.emplace_back(name);
    if (call.properties.back() == "AllowedCPUs") {
      if ((rc = sd_bus_message_enter_container(message, 'v', "ay")) < 0) return rc;
      const void* bytes = nullptr;
      size_t size = 0;
      if ((rc = sd_bus_message_read_array(message, 'y', &bytes, &size)) < 0) return rc;
      const auto* first = static_cast<const uint8_t*>(bytes);
      call.allowed_cpus.assign(first, first + size);
      if ((rc = sd_bus_message_exit_container(message)) < 0) return rc;
    } else if ((rc = sd_bus_message_skip(message, "v")) < 0) {
      return rc;
    }
    if ((rc = sd_bus_message_exit_container(message)) < 0) return rc;
  }
  if (rc < 0) return rc;
  return sd_bus_message_exit_container(message);
}

}  // namespace

std::unique_ptr<PrivateBus> PrivateBus::start_or_skip(const fs::path& dir) {
  const auto program = program_or_skip("dbus-daemon", "dbus-daemon");
  if (!program) return nullptr;
  const fs::path socket = dir / "bus.sock";
  std::string config = kBusConfig;
  config.replace(config.find("@PATH@"), 6, socket.string());
  std::ofstream(dir / "bus.conf") << config;
  std::unique_ptr<PrivateBus> bus(new PrivateBus());
  bus->address_ = "unix:path=" + socket.string();
  bus->daemon_ = std::make_unique<Child>(ChildOptions{
      .argv = {program->string(), "--config-file=" + (dir / "bus.conf").string(), "--nofork", "--nopidfile"},
      .log = dir / "dbus-daemon.log"});
  for (int i = 0; i < 1200 && !can_connect(socket); ++i) {
    if (bus->daemon_->poll()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE_MESSAGE(can_connect(socket), read_text_file(dir / "dbus-daemon.log"));
  return bus;
}

ManagerStandIn::ManagerStandIn(std::string address, std::set<std::string> refuse)
    : address_(std::move(address)), refuse_(std::move(refuse)) {
  thread_ = std::thread([this] { run(); });
  for (int i = 0; i < 6000 && !started_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

ManagerStandIn::~ManagerStandIn() {
  stop_ = true;
  thread_.join();
}

std::vector<RecordedCall> ManagerStandIn::calls() {
  std::lock_guard lock(mutex_);
  return calls_;
}

int ManagerStandIn::set_unit_properties(sd_bus_message* message, void* self, sd_bus_error* error) {
  return static_cast<ManagerStandIn*>(self)->record(message, error);
}

int ManagerStandIn::record(sd_bus_message* message, sd_bus_error* error) {
  RecordedCall call;
  const char* unit = nullptr;
  int runtime = 0;
  int rc = sd_bus_message_read(message, "sb", &unit, &runtime);
  if (rc < 0) return rc;
  call.unit = unit;
  call.runtime = runtime != 0;
  if ((rc = read_properties(message, call)) < 0) return rc;
  const bool refused = refuse_.count(call.unit) != 0;
  {
    std::lock_guard lock(mutex_);
    calls_.push_back(std::move(call));
  }
  if (refused) {
    return sd_bus_error_setf(error, "org.freedesktop.DBus.Error.AccessDenied", "Access denied to %s (stand-in)", unit);
  }
  return sd_bus_reply_method_return(message, "");
}

// sd-bus objects belong to the thread that made them: everything bus-side happens here.
void ManagerStandIn::run() {
  static const sd_bus_vtable vtable[] = {
      SD_BUS_VTABLE_START(0),
      SD_BUS_METHOD("SetUnitProperties", "sba(sv)", "", &ManagerStandIn::set_unit_properties,
                    SD_BUS_VTABLE_UNPRIVILEGED),
      SD_BUS_VTABLE_END,
  };
  sd_bus* bus = nullptr;
  sd_bus_slot* slot = nullptr;
  const bool ok = sd_bus_new(&bus) >= 0 && sd_bus_set_address(bus, address_.c_str()) >= 0 &&
                  sd_bus_set_bus_client(bus, 1) >= 0 && sd_bus_start(bus) >= 0 &&
                  sd_bus_add_object_vtable(bus, &slot, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                           vtable, this) >= 0 &&
                  sd_bus_request_name(bus, "org.freedesktop.systemd1", 0) >= 0;
  serving_ = ok;
  started_ = true;
  while (ok && !stop_.load()) {
    const int processed = sd_bus_process(bus, nullptr);
    if (processed < 0) break;
    if (processed == 0) sd_bus_wait(bus, 50'000);  // 50 ms, then look at stop_ again
  }
  sd_bus_slot_unref(slot);
  sd_bus_flush_close_unref(bus);
}

}  // namespace hostagent::testing
