// The power record: what is written is read back whole; none on disk is a first start; a corrupt
// file stops the reader with the file and the field named; write refuses what read would refuse.
#include <doctest/doctest.h>

#include <fstream>

#include "hostagent/state/power_record.hpp"
#include "record_formats.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

using hostagent::testing::TempDir;

TEST_CASE("a power record is read back as written, and none on disk reads as none") {
  TempDir dir;
  const auto file = dir.path() / "power.json";
  const auto none = read_power_record(file);
  REQUIRE_MESSAGE(none.ok(), none.error().message);
  CHECK_FALSE(none->has_value());

  const PowerRecord record{"4f0e6b2c-1d2a-4b8e-9c3f-0a1b2c3d4e5f", {{"train-0", "uuid-a"}, {"train-1", "uuid-b"}}};
  REQUIRE(write_power_record(file, record).ok());
  const auto read = read_power_record(file);
  REQUIRE_MESSAGE(read.ok(), read.error().message);
  REQUIRE(read->has_value());
  CHECK(**read == record);

  const PowerRecord empty{"5a5a5a5a-1d2a-4b8e-9c3f-0a1b2c3d4e5f", {}};
  REQUIRE(write_power_record(file, empty).ok());
  CHECK(read_power_record(file).value() == std::optional(empty));
}

TEST_CASE("a power record that cannot be read names the file and the field") {
  TempDir dir;
  const auto file = dir.path() / "power.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not JSON"},
      {R"({"running": []})", "boot_id"},
      {R"({"boot_id": "b", "running": [{"vm": "a"}]})", "running[0]"},
      {R"({"boot_id": "b", "running": [{"vm": "../etc", "uuid": "u"}]})", "running[0].vm"},
      {R"({"boot_id": "", "running": []})", "boot_id is empty"},
  };
  for (const auto& one : cases) {
    const std::string& text = one.first;
    const std::string& named = one.second;
    CAPTURE(text);
    std::ofstream(file) << text;
    const auto read = read_power_record(file);
    REQUIRE_FALSE(read.ok());
    CHECK(read.error().code == ErrorCode::parse_error);
    CHECK(read.error().message.find(file.string()) != std::string::npos);
    CHECK(read.error().message.find(named) != std::string::npos);
  }
}

TEST_CASE("write refuses a power record read would refuse, and leaves the file as it was") {
  TempDir dir;
  const auto file = dir.path() / "power.json";
  const PowerRecord good{"b-1", {{"vm1", "u1"}}};
  REQUIRE(write_power_record(file, good).ok());
  const auto refused = write_power_record(file, PowerRecord{"b-2", {{"vm 1", "u1"}}});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("running[0].vm") != std::string::npos);
  CHECK(read_power_record(file).value() == std::optional(good));
}

TEST_CASE("a power record without a format is the release before's, and a newer format is refused") {
  TempDir dir;
  const auto file = dir.path() / "power.json";
  REQUIRE(write_power_record(file, {"b-1", {{"vm1", "u1"}}}).ok());
  hostagent::testing::check_format_rule(file, kPowerRecordFormat, [&] { return read_power_record(file); });
}

}  // namespace
}  // namespace hostagent::state::testing
