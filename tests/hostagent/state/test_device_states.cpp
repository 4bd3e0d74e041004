// The device states: what is written is read back whole; none on disk is every device free; a
// corrupt file stops the reader with the file and the field named; write refuses what read would
// refuse, a device listed twice included.
#include <doctest/doctest.h>

#include <fstream>

#include "hostagent/state/device_states.hpp"
#include "record_formats.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

using hostagent::testing::TempDir;

DeviceStateEntry bind_failure(const std::string& address) {
  return DeviceStateEntry{*PciAddress::parse(address),
                          DeviceState::quarantined,
                          "bind to vfio-pci",
                          "did not bind: dmesg says why",
                          "train-0",
                          "2026-12-04T17:20:00Z"};
}

TEST_CASE("device states are read back as written, and none on disk reads as every device free") {
  TempDir dir;
  const auto file = dir.path() / "device_states.json";
  const auto none = read_device_states(file);
  REQUIRE_MESSAGE(none.ok(), none.error().message);
  CHECK(none->empty());

  auto gone = bind_failure("0000:29:00.0");
  gone.step = "health";
  gone.vm = "";  // seen by the health poller, held by no VM
  // A tenant's device, to be cleaned: no step has failed, so none is named.
  const DeviceStateEntry used{
      *PciAddress::parse("0000:4e:00.0"), DeviceState::cleaning, "", "", "train-0", "2026-12-04T17:21:00Z"};
  const std::vector<DeviceStateEntry> devices = {bind_failure("0000:18:00.0"), gone, used};
  REQUIRE(write_device_states(file, devices).ok());
  const auto read = read_device_states(file);
  REQUIRE_MESSAGE(read.ok(), read.error().message);
  CHECK(*read == devices);
  REQUIRE(write_device_states(file, {}).ok());
  CHECK(read_device_states(file)->empty());
}

TEST_CASE("device states that cannot be read name the file and the field") {
  TempDir dir;
  const auto file = dir.path() / "device_states.json";
  const std::string entry =
      R"("state": "quarantined", "step": "health", "reason": "r", "vm": "", "since": "2026-12-04T17:20:00Z")";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not JSON"},
      {R"({})", "devices"},
      {R"({"devices": [{"address": "17:00.0", )" + entry + "}]}", "devices[0].address"},
      {R"({"devices": [{"address": "0000:17:00.0"}]})", "devices[0]"},
      {R"({"devices": [{"address": "0000:17:00.0", "state": "quarantined", "step": "", "reason": "r", "vm": "", "since": "2026-12-04T17:20:00Z"}]})",
       "devices[0].step is empty"},
      {R"({"devices": [{"address": "0000:17:00.0", "state": "dirty", "step": "", "reason": "", "vm": "", "since": "2026-12-04T17:20:00Z"}]})",
       "devices[0].state: \"dirty\" is neither cleaning nor quarantined"},
      {R"({"devices": [{"address": "0000:17:00.0", "state": "cleaning", "step": "s", "reason": "r", "vm": "a\u0007b", "since": "2026-12-04T17:20:00Z"}]})",
       "devices[0].vm"},
      {R"({"devices": [{"address": "0000:17:00.0", "state": "cleaning", "step": "s", "reason": "r", "vm": "", "since": "yesterday"}]})",
       "devices[0].since"},
      {R"({"devices": [{"address": "0000:17:00.0", )" + entry + R"(}, {"address": "0000:17:00.0", )" + entry + "}]}",
       "devices[1].address 0000:17:00.0 is listed twice"},
  };
  for (const auto& one : cases) {
    const std::string& text = one.first;
    const std::string& named = one.second;
    CAPTURE(text);
    std::ofstream(file) << text;
    const auto read = read_device_states(file);
    REQUIRE_FALSE(read.ok());
    CHECK(read.error().code == ErrorCode::parse_error);
    CHECK(read.error().message.find(file.string()) != std::string::npos);
    CHECK_MESSAGE(read.error().message.find(named) != std::string::npos, read.error().message);
  }
}

TEST_CASE("write refuses device states read would refuse, and leaves the file as it was") {
  TempDir dir;
  const auto file = dir.path() / "device_states.json";
  const std::vector<DeviceStateEntry> good = {bind_failure("0000:18:00.0")};
  REQUIRE(write_device_states(file, good).ok());
  auto bad = good;
  bad.push_back(bind_failure("0000:18:00.0"));
  const auto refused = write_device_states(file, bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK_MESSAGE(refused.error().message.find("listed twice") != std::string::npos, refused.error().message);
  auto control = good;
  control[0].reason = "line\nbreak\x01";
  CHECK_FALSE(write_device_states(file, control).ok());
  CHECK(read_device_states(file).value() == good);
}

// Issue 43, defect 4: a domain hostagent did not make may be named anything libvirt takes, and its
// devices are marked all the same: its name is kept as it is when it is one line of text, quoted
// (every control escaped) when not, and either way written and read back.
TEST_CASE("a device's holder is any domain's name: kept as text, or quoted when it is not one line of it") {
  CHECK(holder_name("Test VM") == "Test VM");
  CHECK(holder_name("train-0") == "train-0");
  CHECK(holder_name("über vm") == "über vm");
  CHECK(holder_name("a\tb") == "\"a\\tb\"");
  CHECK(holder_name(std::string("\x1b[2Jx", 5)) == "\"\\x1b[2Jx\"");
  CHECK(holder_problem("vm", "Test VM").empty());
  CHECK_FALSE(holder_problem("vm", "a\nb").empty());
  CHECK_FALSE(holder_problem("vm", std::string(1025, 'a')).empty());
  const testing::TempDir dir;
  const auto file = dir.path() / "device_states.json";
  const std::vector<DeviceStateEntry> held{{*numa::PciAddress::parse("0000:17:00.0"), DeviceState::cleaning, "", "",
                                            holder_name("Test VM"), "2026-12-04T17:20:00Z"},
                                           {*numa::PciAddress::parse("0000:18:00.0"), DeviceState::cleaning, "", "",
                                            holder_name("tab\tvm"), "2026-12-04T17:20:00Z"}};
  REQUIRE(write_device_states(file, held).ok());
  CHECK(read_device_states(file).value() == held);
}

TEST_CASE("device states without a format are the release before's, and a newer format is refused") {
  hostagent::testing::TempDir dir;
  const auto file = dir.path() / "device_states.json";
  REQUIRE(write_device_states(file, {bind_failure("0000:18:00.0")}).ok());
  hostagent::testing::check_format_rule(file, kDeviceStatesFormat, [&] { return read_device_states(file); });
}

}  // namespace
}  // namespace hostagent::state::testing
