// The operation journal: what is written is read back whole, in start order; replacing and
// removing entries; and the crash cases: a write that never reached its rename leaves the old entry.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <fstream>

#include "hostagent/state/journal.hpp"
#include "record_fixture.hpp"
#include "record_formats.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

namespace fs = std::filesystem;
using hostagent::testing::TempDir;

JournalEntry full_entry(const std::string& id, const std::string& started_at) {
  JournalEntry entry;
  entry.id = id;
  entry.kind = OperationKind::create;
  entry.vm = "vm1";
  entry.started_at = started_at;
  entry.steps_done = {"disk", "seed", "prepare_devices"};
  entry.current_step = "define";
  entry.record = full_record("vm1");
  return entry;
}

void check_same_entry(const JournalEntry& actual, const JournalEntry& expected) {
  CHECK(actual.id == expected.id);
  CHECK(actual.kind == expected.kind);
  CHECK(actual.vm == expected.vm);
  CHECK(actual.started_at == expected.started_at);
  CHECK(actual.steps_done == expected.steps_done);
  CHECK(actual.current_step == expected.current_step);
  check_same(actual.record, expected.record);
}

std::vector<JournalEntry> entries_of(const Journal& journal) {
  auto entries = journal.entries();
  REQUIRE(entries.ok());
  return std::move(*entries);
}

std::vector<std::string> ids_of(const std::vector<JournalEntry>& entries) {
  std::vector<std::string> out;
  out.reserve(entries.size());
  for (const auto& entry : entries) out.push_back(entry.id);
  return out;
}

unsigned mode_of(const fs::path& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777U;
}

TEST_CASE("a fully populated entry is read back whole, for each kind journaled, at each of its steps") {
  TempDir dir;
  auto journal = open_journal(dir.path() / "journal");
  for (const auto kind : {OperationKind::create, OperationKind::remove}) {
    CAPTURE(to_string(kind));
    const auto& steps = journaled_steps(kind);
    REQUIRE(steps.size() >= 3);
    auto entry = full_entry("op-1", "2026-11-29T23:00:00Z");
    entry.kind = kind;
    entry.steps_done = {std::string(steps[0]), std::string(steps[1])};
    entry.current_step = steps[2];
    REQUIRE(journal.write(entry).ok());
    auto entries = entries_of(journal);
    REQUIRE(entries.size() == 1);
    check_same_entry(entries[0], entry);
    entry.steps_done.assign(steps.begin(), steps.end());
    entry.current_step = step::commit;
    REQUIRE(journal.write(entry).ok());
    entries = entries_of(journal);
    REQUIRE(entries.size() == 1);
    check_same_entry(entries[0], entry);
  }
}

TEST_CASE("entries are files of mode 0600 in a directory of mode 0700") {
  TempDir dir;
  const auto directory = dir.path() / "a" / "b" / "journal";
  auto journal = open_journal(directory);
  CHECK(fs::is_directory(directory));
  CHECK(mode_of(directory) == 0700U);
  REQUIRE(journal.write(full_entry("op-1", "2026-11-29T23:00:00Z")).ok());
  CHECK(mode_of(directory / "op-1.json") == 0600U);
  // Only the entry: the temporary file was renamed over it.
  CHECK(std::distance(fs::directory_iterator(directory), fs::directory_iterator()) == 1);
}

TEST_CASE("opening an existing directory keeps its entries and its permissions") {
  TempDir dir;
  fs::permissions(dir.path(), fs::perms(0750));
  REQUIRE(open_journal(dir.path()).write(full_entry("op-1", "2026-11-29T23:00:00Z")).ok());
  const auto again = open_journal(dir.path());
  CHECK(mode_of(dir.path()) == 0750U);
  CHECK(ids_of(entries_of(again)) == std::vector<std::string>{"op-1"});
}

TEST_CASE("the entry's file is JSON with the record in full") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  REQUIRE(journal.write(full_entry("op-1", "2026-11-29T23:00:00Z")).ok());
  const auto document = boost::json::parse(hostagent::testing::read_text_file(dir.path() / "op-1.json"));
  const auto& entry = document.as_object();
  CHECK(entry.at("kind").as_string() == "create");
  CHECK(entry.at("current_step").as_string() == "define");
  const auto& record = entry.at("record").as_object();
  CHECK(record.at("template").as_string() == "gx3-32x256x2h100");
  const auto& allocation = record.at("allocation").as_object();
  CHECK(allocation.at("cpus").as_string() == "0-3,96-99,150");
  CHECK(allocation.at("devices").as_array().size() == 3);
  CHECK(allocation.at("hugepages").as_array().at(1).as_object().at("pages").as_uint64() == 18446744073709551615ULL);
  CHECK(record.at("inputs").as_object().at("user_data").as_bool());
}

TEST_CASE("writing an entry again replaces it") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  auto entry = full_entry("op-1", "2026-11-29T23:00:00Z");
  REQUIRE(journal.write(entry).ok());
  entry.steps_done.push_back("define");
  entry.current_step = "start";
  entry.record.allocation.cpus = {8, 9};
  REQUIRE(journal.write(entry).ok());
  const auto entries = entries_of(journal);
  REQUIRE(entries.size() == 1);
  check_same_entry(entries[0], entry);
  CHECK_FALSE(fs::exists(dir.path() / "op-1.json.tmp"));
}

TEST_CASE("remove deletes the entry, and removing an absent one is fine") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  REQUIRE(journal.write(full_entry("op-1", "2026-11-29T23:00:00Z")).ok());
  REQUIRE(journal.write(full_entry("op-2", "2026-11-29T23:00:01Z")).ok());
  REQUIRE(journal.remove("op-1").ok());
  CHECK_FALSE(fs::exists(dir.path() / "op-1.json"));
  CHECK(ids_of(entries_of(journal)) == std::vector<std::string>{"op-2"});
  CHECK(journal.remove("op-1").ok());
  CHECK(journal.remove("never-written").ok());
  CHECK(ids_of(entries_of(journal)) == std::vector<std::string>{"op-2"});
}

TEST_CASE("entries come oldest first, then by id") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  // A fraction sorts after the whole second it belongs to, though "." < "Z" as text.
  REQUIRE(journal.write(full_entry("c", "2026-11-29T23:00:00.5Z")).ok());
  REQUIRE(journal.write(full_entry("a", "2026-11-30T00:00:00Z")).ok());
  REQUIRE(journal.write(full_entry("d", "2026-11-29T23:00:00Z")).ok());
  REQUIRE(journal.write(full_entry("b", "2026-11-29T23:00:00.50Z")).ok());
  REQUIRE(journal.write(full_entry("e", "2025-12-31T23:59:59.999999999Z")).ok());
  REQUIRE(journal.write(full_entry("f", "2026-11-29T23:00:00.05Z")).ok());
  CHECK(ids_of(entries_of(journal)) == std::vector<std::string>{"e", "d", "f", "b", "c", "a"});
}

TEST_CASE("leftover temporary files are ignored and removed") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  write_text_file(dir.path() / "op-9.json.tmp", "{\"id\": \"op-9\", \"kind\": ");
  write_text_file(dir.path() / ".json.tmp", "");
  CHECK(entries_of(journal).empty());
  CHECK_FALSE(fs::exists(dir.path() / "op-9.json.tmp"));
  CHECK_FALSE(fs::exists(dir.path() / ".json.tmp"));
}

TEST_CASE("a crash between writing the temporary file and the rename leaves the older entry") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  const auto older = full_entry("op-1", "2026-11-29T23:00:00Z");
  REQUIRE(journal.write(older).ok());
  // The newer entry, whole, as the interrupted write left it: written and synced, never renamed.
  TempDir elsewhere;
  auto newer = older;
  newer.steps_done.push_back("define");
  newer.current_step = "start";
  REQUIRE(open_journal(elsewhere.path()).write(newer).ok());
  fs::copy_file(elsewhere.path() / "op-1.json", dir.path() / "op-1.json.tmp");
  const auto entries = entries_of(journal);
  REQUIRE(entries.size() == 1);
  check_same_entry(entries[0], older);
  CHECK_FALSE(fs::exists(dir.path() / "op-1.json.tmp"));
  // And the next write of that entry goes through as usual.
  REQUIRE(journal.write(newer).ok());
  check_same_entry(entries_of(journal).at(0), newer);
}

TEST_CASE("files that are not entries are left alone") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  write_text_file(dir.path() / "README", "not an entry");
  write_text_file(dir.path() / "op-1.json~", "an editor's backup");
  fs::create_directory(dir.path() / "sub");
  REQUIRE(journal.write(full_entry("op-1", "2026-11-29T23:00:00Z")).ok());
  CHECK(ids_of(entries_of(journal)) == std::vector<std::string>{"op-1"});
  CHECK(fs::exists(dir.path() / "README"));
  CHECK(fs::exists(dir.path() / "op-1.json~"));
}

TEST_CASE("a journal entry without a format is the release before's, and a newer format is refused") {
  hostagent::testing::TempDir dir;
  auto journal = open_journal(dir.path());
  REQUIRE(journal.write(full_entry("op-3", "2026-12-01T10:00:00Z")).ok());
  hostagent::testing::check_format_rule(dir.path() / "op-3.json", kJournalFormat, [&] { return journal.entries(); });
}

}  // namespace
}  // namespace hostagent::state::testing
