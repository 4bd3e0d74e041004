// Create requests' records: what is written is read back whole; every outcome's rules hold on write
// and on read; a corrupt or foreign file stops the reader with the file named; a write a crash cut
// short is discarded.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>

#include "hostagent/state/create_requests.hpp"
#include "record_formats.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

namespace fs = std::filesystem;
using hostagent::testing::TempDir;

CreateRequestRecord pending(const std::string& operation, const std::string& request_id) {
  CreateRequestRecord record;
  record.operation = operation;
  record.request_id = request_id;
  record.vm = "vm-" + operation;
  record.template_name = "gx3-16x128x1h100";
  record.submitted_at = "2026-12-03T10:00:00.125Z";
  return record;
}

CreateRequests opened(const fs::path& directory) {
  auto store = CreateRequests::open(directory);
  REQUIRE_MESSAGE(store.ok(), store.error().message);
  return std::move(*store);
}

std::map<std::string, CreateRequestRecord> by_operation(const CreateRequests& store) {
  auto records = store.records();
  REQUIRE_MESSAGE(records.ok(), records.error().message);
  std::map<std::string, CreateRequestRecord> out;
  for (auto& record : *records) out.emplace(record.operation, std::move(record));
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST_CASE("each outcome's record is read back whole, and a removed one is gone") {
  TempDir dir;
  auto store = opened(dir.path() / "requests");
  struct stat st {};
  REQUIRE(::stat((dir.path() / "requests").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777U) == 0700U);

  auto created = pending("op-a-1", "9f1c-uuid");
  created.outcome = CreateOutcome::created;
  created.ended_at = "2026-12-03T10:01:00Z";
  auto failed = pending("op-a-2", "req/with:odd{chars}");
  failed.outcome = CreateOutcome::failed;
  failed.ended_at = "2026-12-03T10:02:00Z";
  failed.error_code = "does_not_fit";
  failed.error = "needs 8 GPUs; 2 are free";
  auto gone = pending("op-a-3", "r3");
  gone.outcome = CreateOutcome::gone;
  gone.ended_at = "2026-12-03T10:03:00Z";
  gone.gone_at = "2026-12-03T11:00:00Z";
  gone.error = "deleted by operation op-a-9";
  const std::vector<CreateRequestRecord> all = {pending("op-a-0", "r0"), created, failed, gone};
  for (const auto& record : all) REQUIRE(store.write(record).ok());

  const auto read = by_operation(opened(dir.path() / "requests"));  // another instance: from disk
  REQUIRE(read.size() == all.size());
  for (const auto& expected : all) {
    CAPTURE(expected.operation);
    const auto& actual = read.at(expected.operation);
    CHECK(actual.request_id == expected.request_id);
    CHECK(actual.vm == expected.vm);
    CHECK(actual.template_name == expected.template_name);
    CHECK(actual.submitted_at == expected.submitted_at);
    CHECK(actual.outcome == expected.outcome);
    CHECK(actual.ended_at == expected.ended_at);
    CHECK(actual.error_code == expected.error_code);
    CHECK(actual.error == expected.error);
    CHECK(actual.gone_at == expected.gone_at);
  }
  REQUIRE(store.remove("op-a-2").ok());
  REQUIRE(store.remove("op-a-2").ok());  // absent is fine
  CHECK(by_operation(store).count("op-a-2") == 0);
  CHECK(by_operation(store).size() == 3);
}

TEST_CASE("a record that breaks a rule is refused on write with the field named") {
  TempDir dir;
  auto store = opened(dir.path());
  const std::vector<std::pair<std::function<void(CreateRequestRecord&)>, std::string>> cases = {
      {[](auto& r) { r.operation = "../op"; }, "operation"},
      {[](auto& r) { r.request_id = ""; }, "request_id"},
      {[](auto& r) { r.request_id = "has space"; }, "request_id"},
      {[](auto& r) { r.request_id = std::string(129, 'x'); }, "request_id"},
      {[](auto& r) { r.vm = "a\nb"; }, "vm"},
      {[](auto& r) { r.submitted_at = "yesterday"; }, "submitted_at"},
      {[](auto& r) { r.ended_at = "2026-12-03T10:00:00Z"; }, "pending"},
      {[](auto& r) { r.outcome = CreateOutcome::created; }, "ended_at"},
      {[](auto& r) { r.error_code = "conflict"; }, "error_code"},
      {[](auto& r) {
         r.outcome = CreateOutcome::failed;
         r.ended_at = "2026-12-03T10:00:00Z";
         r.error_code = "teapot";
       },
       "error_code"},
      {[](auto& r) {
         r.outcome = CreateOutcome::gone;
         r.ended_at = "2026-12-03T10:00:00Z";
       },
       "gone_at"},
  };
  for (const auto& refused : cases) {
    const std::string& named = refused.second;  // not a structured binding: clang's CAPTURE cannot take one
    auto record = pending("op-b-1", "r1");
    refused.first(record);
    const auto written = store.write(record);
    CAPTURE(named);
    REQUIRE_FALSE(written.ok());
    CHECK(written.error().code == ErrorCode::invalid_argument);
    CHECK(written.error().message.find(named) != std::string::npos);
  }
  CHECK(by_operation(store).empty());
}

TEST_CASE(
    "a corrupt, foreign or renamed record stops the reader with its file named, and a cut-short write is dropped") {
  TempDir dir;
  auto store = opened(dir.path());
  REQUIRE(store.write(pending("op-c-1", "r1")).ok());
  write_text(dir.path() / "op-c-2.json.tmp", "{\"operation\": \"op-c-2\", \"requ");  // a crash mid-write
  write_text(dir.path() / "notes.txt", "an operator's notes");                       // not ours: skipped
  CHECK(by_operation(store).size() == 1);
  CHECK_FALSE(fs::exists(dir.path() / "op-c-2.json.tmp"));

  const std::string good = R"({"operation":"op-c-3","request_id":"r3","vm":"v","template":"t",)"
                           R"("submitted_at":"2026-12-03T10:00:00Z","outcome":"pending","ended_at":"",)"
                           R"("error_code":"","error":"","gone_at":""})";
  for (const auto& corrupt : std::vector<std::pair<std::string, std::string>>{
           {"{not json", "not JSON"},
           {R"({"operation":"op-c-3"})", "request_id"},
           {std::string(good).replace(good.find("pending"), 7, "maybe"), "outcome"},
           {std::string(good).replace(good.find("op-c-3"), 6, "op-c-4"), "file name"},
           {std::string(good).replace(good.find("\"r3\""), 4, "\"r 3\""), "request_id"}}) {
    const std::string& why = corrupt.second;  // not a structured binding: clang's CAPTURE cannot take one
    CAPTURE(why);
    write_text(dir.path() / "op-c-3.json", corrupt.first);
    const auto records = store.records();
    REQUIRE_FALSE(records.ok());
    CHECK(records.error().code == ErrorCode::parse_error);
    CHECK(records.error().message.find("op-c-3.json") != std::string::npos);
    CHECK(records.error().message.find(why) != std::string::npos);
  }
  write_text(dir.path() / "op-c-3.json", good);
  CHECK(by_operation(store).size() == 2);
}

TEST_CASE("a create request record without a format is the release before's, and a newer format is refused") {
  hostagent::testing::TempDir dir;
  auto store = opened(dir.path());
  REQUIRE(store.write(pending("op-7", "req-7")).ok());
  hostagent::testing::check_format_rule(dir.path() / "op-7.json", kCreateRequestFormat,
                                        [&] { return store.records(); });
}

}  // namespace
}  // namespace hostagent::state::testing
