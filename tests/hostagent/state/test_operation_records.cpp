// Operation records: what is written is read back whole; write refuses what read would refuse.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/state/operation_records.hpp"
#include "record_formats.hpp"
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

namespace hostagent::state::testing {
namespace {

OperationRecord start_of(const std::string& vm, const std::string& kind, int n) {
  auto record = ended_start();
  record.vm = vm;
  record.kind = kind;
  record.id = "op-run-" + std::to_string(n);
  const std::string second = (n < 10 ? "0" : "") + std::to_string(n);
  record.submitted_at = "2026-12-04T10:00:" + second + "Z";
  record.started_at = record.submitted_at;
  record.finished_at = record.submitted_at;
  return record;
}

std::vector<std::string> ids(const std::vector<OperationRecord>& records) {
  std::vector<std::string> out;
  out.reserve(records.size());
  for (const auto& record : records) out.push_back(record.id);
  return out;
}

// As releases before this one wrote a VM's start history: each record's own JSON (the operation
// records' writer), in a list, oldest first.
void write_older_history(const std::filesystem::path& directory, const std::string& vm,
                         const std::vector<OperationRecord>& starts) {
  hostagent::testing::TempDir written;
  auto records = OperationRecords::open(written.path()).value();
  std::string list;
  for (const auto& start : starts) {
    REQUIRE(records.write(start).ok());
    std::string text = hostagent::testing::read_text_file(written.path() / (start.id + ".json"));
    while (!text.empty() && text.back() == '\n') text.pop_back();
    list += (list.empty() ? "" : ",") + text;
  }
  hostagent::testing::write_text_file(directory / (vm + ".json"),
                                      R"({"vm":")" + vm + R"(","starts":[)" + list + "]}\n");
}

TEST_CASE("an earlier release's start history is read oldest first, by VM, and forgotten whole") {
  hostagent::testing::TempDir dir;
  auto history = StartHistory::open(dir.path() / "starts").value();
  CHECK(history.starts("train-0").value().empty());
  auto create = start_of("train-0", "create", 1);
  create.timeline.push_back({"up", "2026-12-04T10:00:09Z", 6.5, "guest agent answered"});
  write_older_history(dir.path() / "starts", "train-0", {create, start_of("train-0", "start", 2)});
  write_older_history(dir.path() / "starts", "other", {start_of("other", "start", 3)});
  const auto read = history.starts("train-0").value();
  CHECK(ids(read) == std::vector<std::string>{"op-run-1", "op-run-2"});
  CHECK(read.front() == create);
  auto vms = history.vms().value();
  std::sort(vms.begin(), vms.end());
  CHECK(vms == std::vector<std::string>{"other", "train-0"});
  REQUIRE(history.forget("train-0").ok());
  CHECK(history.starts("train-0").value().empty());
  CHECK(ids(history.starts("other").value()) == std::vector<std::string>{"op-run-3"});
  CHECK(history.forget("train-0").ok());  // absent: fine
}

TEST_CASE("a start history that cannot be read is an error naming the file, and so is a bad record in one") {
  hostagent::testing::TempDir dir;
  auto history = StartHistory::open(dir.path()).value();
  std::ofstream(dir.path() / "train-0.json") << R"({"vm":"train-1","starts":[]})";
  const auto read = history.starts("train-0");
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().code == ErrorCode::parse_error);
  CHECK(read.error().message.find((dir.path() / "train-0.json").string()) != std::string::npos);
  CHECK(read.error().message.find("field 'vm' differs from the file name") != std::string::npos);
  write_older_history(dir.path(), "train-2", {start_of("train-2", "start", 1)});
  auto text = hostagent::testing::read_text_file(dir.path() / "train-2.json");
  text.replace(text.find(R"("state":"failed")"), 16, R"("state":"paused")");
  hostagent::testing::write_text_file(dir.path() / "train-2.json", text);
  CHECK(history.starts("train-2").error().code == ErrorCode::parse_error);
  CHECK(history.starts("../etc").error().code == ErrorCode::invalid_argument);
}

TEST_CASE("an operation record without a format is the release before's, and a newer format is refused") {
  hostagent::testing::TempDir dir;
  auto records = OperationRecords::open(dir.path()).value();
  REQUIRE(records.write(ended_start()).ok());
  hostagent::testing::check_format_rule(dir.path() / "op-mf4a1x2c9k-12.json", kOperationRecordFormat,
                                        [&] { return records.records(); });
}

}  // namespace
}  // namespace hostagent::state::testing
