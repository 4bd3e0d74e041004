// Operation records: what is written is read back whole; write refuses what read would refuse.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/state/operation_records.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

OperationRecord ended_start() {
  return OperationRecord{"op-mf4a1x2c9k-12",
                         "start",
                         "train-0",
                         "",
                         "",
                         "failed",
                         "prepare_devices",
                         1,
                         2,
                         "conflict",
                         "IOMMU group 41 of 0000:3b:00.1 holds other functions",
                         "2026-12-04T10:00:00Z",
                         "2026-12-04T10:00:00.5Z",
                         "2026-12-04T10:00:01Z",
                         0.75,
                         {{"prepare_devices", "2026-12-04T10:00:00.625Z", 0.125, ""}}};
}

TEST_CASE("an operation record is read back as written") {
  hostagent::testing::TempDir dir;
  auto records = OperationRecords::open(dir.path() / "operations").value();
  REQUIRE(records.write(ended_start()).ok());
  const auto read = records.records();
  REQUIRE_MESSAGE(read.ok(), read.error().message);
  REQUIRE(read->size() == 1);
  CHECK(read->front() == ended_start());
  REQUIRE(records.remove("op-mf4a1x2c9k-12").ok());
  CHECK(records.records().value().empty());
  CHECK(records.remove("op-mf4a1x2c9k-12").ok());  // absent: fine
}

TEST_CASE("write refuses an operation record read would refuse, naming the field") {
  hostagent::testing::TempDir dir;
  auto records = OperationRecords::open(dir.path()).value();
  const std::vector<std::pair<std::function<void(OperationRecord&)>, std::string>> cases = {
      {[](OperationRecord& r) { r.id = "../x"; }, "id"},
      {[](OperationRecord& r) { r.kind = "migrate"; }, "kind"},
      {[](OperationRecord& r) { r.vm = "a b"; }, "vm"},
      {[](OperationRecord& r) { r.error_code = ""; }, "error_code"},
      {[](OperationRecord& r) { r.finished_at = "soon"; }, "finished_at"},
      {[](OperationRecord& r) { r.step_number = 3; }, "step_number"},
      {[](OperationRecord& r) { r.timeline.front().name = "a b"; }, "timeline: phase"},
      {[](OperationRecord& r) { r.timeline.front().seconds = -1; }, "negative"},
      {[](OperationRecord& r) { r.timeline.front().ended_at = "soon"; }, "timeline ended_at"},
  };
  for (const auto& one : cases) {
    auto record = ended_start();
    one.first(record);
    const auto refused = records.write(record);
    REQUIRE_FALSE(refused.ok());
    CHECK_MESSAGE(refused.error().message.find(one.second) != std::string::npos, refused.error().message);
  }
  CHECK(records.records().value().empty());
}

TEST_CASE("a record written before timelines were kept is read with none") {
  hostagent::testing::TempDir dir;
  auto records = OperationRecords::open(dir.path()).value();
  auto expected = ended_start();
  expected.timeline.clear();
  // What the daemon wrote before the timeline: every other field, no "timeline" key.
  std::ofstream(dir.path() / "op-mf4a1x2c9k-12.json")
      << R"({"id":"op-mf4a1x2c9k-12","kind":"start","vm":"train-0","request_id":"","template":"",)"
      << R"("state":"failed","step":"prepare_devices","step_number":1,"step_count":2,"error_code":"conflict",)"
      << R"("error":"IOMMU group 41 of 0000:3b:00.1 holds other functions","submitted_at":"2026-12-04T10:00:00Z",)"
      << R"("started_at":"2026-12-04T10:00:00.5Z","finished_at":"2026-12-04T10:00:01Z","duration_seconds":0.75})";
  const auto read = records.records();
  REQUIRE_MESSAGE(read.ok(), read.error().message);
  REQUIRE(read->size() == 1);
  CHECK(read->front() == expected);
  std::ofstream(dir.path() / "op-mf4a1x2c9k-12.json", std::ios::trunc)
      << R"({"id":"op-mf4a1x2c9k-12","kind":"start","vm":"train-0","request_id":"","template":"",)"
      << R"("state":"failed","step":"prepare_devices","step_number":1,"step_count":2,"error_code":"conflict",)"
      << R"("error":"x","submitted_at":"2026-12-04T10:00:00Z","started_at":"2026-12-04T10:00:00.5Z",)"
      << R"("finished_at":"2026-12-04T10:00:01Z","duration_seconds":0.75,"timeline":{"phase":"launch"}})";
  const auto refused = records.records();
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.error().message.find("'timeline' is not a list") != std::string::npos, refused.error().message);
}

}  // namespace
}  // namespace hostagent::state::testing
