// The cleaning evidence log: records read back as appended, chained by SHA-256; a line changed,
// removed or inserted afterwards breaks the chain there and the reader says so; a torn last line is
// cut at open and the chain goes on; append refuses what read would refuse.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "hostagent/common/sha256.hpp"
#include "hostagent/state/cleaning_evidence.hpp"
#include "record_formats.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

using hostagent::testing::contains;
using hostagent::testing::read_text_file;
using hostagent::testing::TempDir;
using hostagent::testing::write_text_file;

CleaningEvidence cleaning_of(const std::string& device, const std::string& vm) {
  return CleaningEvidence{
      *PciAddress::parse(device),
      "nvme",
      vm,
      "clean",
      "2026-12-04T18:00:00Z",
      "2026-12-04T18:00:09Z",
      {{"reset", "passed", "FLR; config space answered 1b36:0010 after 0.1 s", "2026-12-04T18:00:00Z",
        "2026-12-04T18:00:01Z"},
       {"erase", "passed", "Format NVM, secure erase", "2026-12-04T18:00:01Z", "2026-12-04T18:00:09Z"}}};
}

std::unique_ptr<EvidenceLog> evidence_log_at(const std::filesystem::path& file, std::size_t* torn = nullptr) {
  auto log = EvidenceLog::open(file, torn);
  REQUIRE_MESSAGE(log.ok(), log.error().message);
  return std::move(log).value();
}

std::vector<std::string> evidence_lines(const std::filesystem::path& file) {
  std::istringstream text(read_text_file(file));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

void write_evidence_lines(const std::filesystem::path& file, const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  write_text_file(file, text);
}

TEST_CASE("evidence is read back as appended, each record chained on the one before, across a reopen") {
  TempDir dir;
  const auto file = dir.path() / "evidence.log";
  CHECK(evidence_log_at(file)->read()->records.empty());
  auto log = evidence_log_at(file);
  const auto first = log->append(cleaning_of("0000:26:00.1", "vm-a"));
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  CHECK(first->sequence == 1);
  CHECK(first->previous_sha256 == sha256_hex(""));
  auto reopened = evidence_log_at(file);  // a restart: the chain goes on from the last line
  const auto second = reopened->append(cleaning_of("0000:46:00.1", ""));
  REQUIRE_MESSAGE(second.ok(), second.error().message);
  CHECK(second->sequence == 2);
  CHECK(second->previous_sha256 == first->sha256);
  CHECK(first->sha256 == sha256_hex(evidence_lines(file).at(0)));

  const auto chain = reopened->read();
  REQUIRE_MESSAGE(chain.ok(), chain.error().message);
  CHECK(chain->broken.empty());
  REQUIRE(chain->records.size() == 2);
  CHECK(chain->records[0].evidence == cleaning_of("0000:26:00.1", "vm-a"));
  CHECK(chain->records[1].evidence == cleaning_of("0000:46:00.1", ""));
  CHECK(chain->records[1].sha256 == second->sha256);
}

TEST_CASE("records appended together are chained in order, as if appended one by one, and one bad one refuses all") {
  TempDir dir;
  const auto file = dir.path() / "evidence.log";
  auto log = evidence_log_at(file);
  REQUIRE(log->append(cleaning_of("0000:26:00.1", "vm-a")).ok());
  const auto together = log->append_all({cleaning_of("0000:26:00.2", "vm-b"), cleaning_of("0000:46:00.1", "vm-b")});
  REQUIRE_MESSAGE(together.ok(), together.error().message);
  REQUIRE(together->size() == 2);
  CHECK((*together)[0].sequence == 2);
  CHECK((*together)[1].sequence == 3);
  CHECK((*together)[1].previous_sha256 == (*together)[0].sha256);
  CHECK((*together)[1].sha256 == sha256_hex(evidence_lines(file).at(2)));
  const auto chain = evidence_log_at(file)->read();
  REQUIRE(chain.ok());
  CHECK(chain->broken.empty());
  CHECK(chain->records.size() == 3);

  auto bad = cleaning_of("0000:46:00.2", "vm-c");
  bad.outcome = "dusted";
  const auto refused = log->append_all({cleaning_of("0000:46:00.3", "vm-c"), bad});
  REQUIRE_FALSE(refused.ok());
  CHECK(evidence_lines(file).size() == 3);
  CHECK(log->append(cleaning_of("0000:46:00.3", "vm-c"))->sequence == 4);
}

TEST_CASE("a line changed, removed or inserted after it was written breaks the chain, and the reader says where") {
  TempDir dir;
  const auto file = dir.path() / "evidence.log";
  auto log = evidence_log_at(file);
  for (const char* device : {"0000:26:00.1", "0000:26:00.2", "0000:46:00.1"}) {
    REQUIRE(log->append(cleaning_of(device, "vm-a")).ok());
  }
  const auto whole = evidence_lines(file);
  REQUIRE(whole.size() == 3);

  SUBCASE("changed: the line after it no longer carries its digest") {
    auto lines = whole;
    const auto at = lines[0].find("\"clean\"");
    REQUIRE(at != std::string::npos);
    lines[0].replace(at, 7, "\"quarantined\"");  // the first tenant's outcome rewritten
    write_evidence_lines(file, lines);
    const auto chain = log->read();
    REQUIRE(chain.ok());
    CHECK(chain->records.size() == 1);
    CHECK_MESSAGE(contains(chain->broken, "line 2: previous_sha256"), chain->broken);
    CHECK(contains(chain->broken, "a line before it was changed"));
  }
  SUBCASE("removed") {
    write_evidence_lines(file, {whole[0], whole[2]});
    const auto chain = log->read();
    REQUIRE(chain.ok());
    CHECK(chain->records.size() == 1);
    CHECK_MESSAGE(contains(chain->broken, "line 2: sequence 3 where 2 was expected"), chain->broken);
  }
  SUBCASE("not JSON") {
    write_evidence_lines(file, {whole[0], "{oops", whole[2]});
    const auto chain = log->read();
    REQUIRE(chain.ok());
    CHECK_MESSAGE(contains(chain->broken, "line 2: not JSON"), chain->broken);
  }
  SUBCASE("whole: the same lines read clean") {
    write_evidence_lines(file, whole);
    CHECK(log->read()->broken.empty());
  }
}

TEST_CASE("a line torn by a crash is cut when the log is opened again, and the chain goes on whole") {
  TempDir dir;
  const auto file = dir.path() / "evidence.log";
  REQUIRE(evidence_log_at(file)->append(cleaning_of("0000:26:00.1", "vm-a")).ok());
  const std::string whole = read_text_file(file);
  write_text_file(file, whole + "{\"sequence\":2,\"dev");
  std::size_t torn = 0;
  auto log = evidence_log_at(file, &torn);
  CHECK(torn == 18);
  CHECK(read_text_file(file) == whole);
  REQUIRE(log->append(cleaning_of("0000:26:00.2", "vm-b")).ok());
  const auto chain = log->read();
  REQUIRE(chain.ok());
  CHECK(chain->broken.empty());
  CHECK(chain->records.size() == 2);
}

TEST_CASE("append refuses evidence the reader would refuse, and writes nothing") {
  TempDir dir;
  const auto file = dir.path() / "evidence.log";
  auto log = evidence_log_at(file);
  auto bad_outcome = cleaning_of("0000:26:00.1", "vm-a");
  bad_outcome.outcome = "probably fine";
  auto bad_step = cleaning_of("0000:26:00.1", "vm-a");
  bad_step.steps[1].result = "ok";
  // A holder is a libvirt domain's name as state/device_states keeps it (holder_name): one line of text.
  auto bad_vm = cleaning_of("0000:26:00.1", "vm\nforged");
  auto bad_time = cleaning_of("0000:26:00.1", "vm-a");
  bad_time.steps[0].finished_at = "later";
  for (const auto& refusal :
       std::vector<std::pair<CleaningEvidence, std::string>>{{bad_outcome, "outcome"},
                                                             {bad_step, "steps[1].result"},
                                                             {bad_vm, "vm"},
                                                             {bad_time, "steps[0].finished_at"}}) {
    const std::string& field = refusal.second;
    CAPTURE(field);
    const auto refused = log->append(refusal.first);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::invalid_argument);
    CHECK_MESSAGE(contains(refused.error().message, field), refused.error().message);
  }
  CHECK_FALSE(std::filesystem::exists(file));
}

TEST_CASE("an evidence line without a format is the release before's, and a newer format breaks the chain there") {
  TempDir dir;
  const auto file = dir.path() / "evidence.jsonl";
  REQUIRE(evidence_log_at(file)->append(cleaning_of("0000:18:00.0", "train-0")).ok());
  auto line = boost::json::parse(read_text_file(file)).as_object();
  CHECK(line.at("format") == kCleaningEvidenceFormat);
  // The first line's chain is the empty text's hash, whatever the line holds: it can be edited alone.
  line.erase("format");
  write_text_file(file, boost::json::serialize(line) + "\n");
  const auto older = evidence_log_at(file)->read();
  REQUIRE(older.ok());
  CHECK(older->broken.empty());
  CHECK(older->records.size() == 1);
  line["format"] = kCleaningEvidenceFormat + 1;
  write_text_file(file, boost::json::serialize(line) + "\n");
  const auto newer = evidence_log_at(file)->read();
  REQUIRE(newer.ok());
  CHECK(newer->records.empty());
  CHECK_MESSAGE(newer->broken.find("format 2 is newer than this hostagent reads") != std::string::npos, newer->broken);
}

}  // namespace
}  // namespace hostagent::state::testing
