// The maintenance record: written and read back whole, none on disk is a host in service, a
// corrupt or newer file stops the reader naming the file and the field, write refuses what read
// would refuse and leaves the file as it was.
#include <doctest/doctest.h>

#include <fstream>

#include "hostagent/state/maintenance_record.hpp"
#include "record_formats.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

using hostagent::testing::TempDir;
using service::MaintenanceMode;

TEST_CASE("a maintenance record is read back as written, with its format, and none on disk reads as none") {
  TempDir dir;
  const auto file = dir.path() / "maintenance.json";
  const auto none = read_maintenance_record(file);
  REQUIRE_MESSAGE(none.ok(), none.error().message);
  CHECK_FALSE(none->has_value());
  for (const MaintenanceRecord& record : {
           MaintenanceRecord{MaintenanceMode::cordoned, "PSU swap, INC-4411", "uid:0", "2026-12-07T05:00:00Z", ""},
           MaintenanceRecord{MaintenanceMode::draining, "chassis", "cn=ops", "2026-12-07T05:00:00Z",
                             "2026-12-07T05:05:00Z"},
           MaintenanceRecord{MaintenanceMode::drained, "chassis", "cn=ops", "2026-12-07T05:00:00Z",
                             "2026-12-07T05:05:00Z"},
           MaintenanceRecord{MaintenanceMode::in_service, "", "uid:1000", "2026-12-07T06:00:00Z", ""},
       }) {
    CAPTURE(service::to_string(record.mode));
    REQUIRE(write_maintenance_record(file, record).ok());
    const auto read = read_maintenance_record(file);
    REQUIRE_MESSAGE(read.ok(), read.error().message);
    REQUIRE(read->has_value());
    CHECK(**read == record);
  }
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.rfind(R"({"format":1,)", 0) == 0);
}

TEST_CASE("a maintenance record that cannot be read names the file and the field, and a newer format its version") {
  TempDir dir;
  const auto file = dir.path() / "maintenance.json";
  const std::string tail = R"(, "principal": "p", "since": "2026-12-07T05:00:00Z", "deadline": ""})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not JSON"},
      {R"({"format": 2, "mode": "cordoned", "reason": "r")" + tail, "format 2 is newer than this hostagent reads"},
      {R"({"format": -1, "mode": "cordoned", "reason": "r")" + tail, "format -1"},
      {R"({"format": "1", "mode": "cordoned", "reason": "r")" + tail, "format"},
      {R"({"format": 1, "mode": "paused", "reason": "r")" + tail, "mode \"paused\""},
      {R"({"format": 1, "mode": "cordoned", "reason": "")" + tail, "reason is empty"},
      {R"({"format": 1, "mode": "draining", "reason": "r")" + tail, "deadline"},
      {R"({"format": 1, "mode": "cordoned", "reason": "r", "principal": "p", "since": "yesterday", "deadline": ""})",
       "since"},
  };
  for (const auto& one : cases) {
    const std::string& text = one.first;
    const std::string& named = one.second;
    CAPTURE(text);
    std::ofstream(file) << text;
    const auto read = read_maintenance_record(file);
    REQUIRE_FALSE(read.ok());
    CHECK(read.error().code == ErrorCode::parse_error);
    CHECK(read.error().message.find(file.string()) != std::string::npos);
    CHECK_MESSAGE(read.error().message.find(named) != std::string::npos, read.error().message);
  }
}

TEST_CASE("write refuses a maintenance record read would refuse, and leaves the file as it was") {
  TempDir dir;
  const auto file = dir.path() / "maintenance.json";
  const MaintenanceRecord good{MaintenanceMode::cordoned, "r", "uid:0", "2026-12-07T05:00:00Z", ""};
  REQUIRE(write_maintenance_record(file, good).ok());
  for (const MaintenanceRecord& bad : {
           MaintenanceRecord{MaintenanceMode::cordoned, "", "uid:0", "2026-12-07T05:00:00Z", ""},
           MaintenanceRecord{MaintenanceMode::cordoned, std::string(257, 'x'), "uid:0", "2026-12-07T05:00:00Z", ""},
           MaintenanceRecord{MaintenanceMode::cordoned, "two\nlines", "uid:0", "2026-12-07T05:00:00Z", ""},
           MaintenanceRecord{MaintenanceMode::cordoned, "r", "uid:0", "2026-12-07T05:00:00Z", "2026-12-07T05:05:00Z"},
           MaintenanceRecord{MaintenanceMode::draining, "r", "uid:0", "2026-12-07T05:00:00Z", ""},
           MaintenanceRecord{MaintenanceMode::cordoned, "r", "uid:0", "", ""},
       }) {
    CAPTURE(bad.reason);
    const auto written = write_maintenance_record(file, bad);
    REQUIRE_FALSE(written.ok());
    CHECK(written.error().code == ErrorCode::invalid_argument);
  }
  CHECK(read_maintenance_record(file).value() == std::optional(good));
}

TEST_CASE("a maintenance record without a format reads as format 0, and a newer format is refused") {
  TempDir dir;
  const auto file = dir.path() / "maintenance.json";
  REQUIRE(write_maintenance_record(file, {MaintenanceMode::cordoned, "r", "uid:0", "2026-12-07T05:00:00Z", ""}).ok());
  hostagent::testing::check_format_rule(file, kMaintenanceFormat, [&] { return read_maintenance_record(file); });
}

}  // namespace
}  // namespace hostagent::state::testing
