// What the journal refuses: bad ids and entries on write, unreadable files on read (naming the
// file and the field), and a directory it cannot create.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <fstream>

#include "hostagent/state/journal.hpp"
#include "record_fixture.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using hostagent::testing::TempDir;

JournalEntry entry_with_id(const std::string& id) {
  JournalEntry entry;
  entry.id = id;
  entry.kind = OperationKind::remove;
  entry.vm = "vm1";
  entry.started_at = "2026-11-29T23:00:00Z";
  entry.current_step = "destroy";
  entry.record = full_record("vm1");
  return entry;
}

// Writes a valid entry "op-1", then rewrites its file after `edit` changes the JSON.
void edit_entry(const fs::path& directory, const std::function<void(json::object&)>& edit) {
  REQUIRE(open_journal(directory).write(entry_with_id("op-1")).ok());
  const auto path = directory / "op-1.json";
  auto document = json::parse(hostagent::testing::read_text_file(path));
  edit(document.as_object());
  write_text_file(path, json::serialize(document));
}

json::object& object_at(json::object& root, const std::vector<std::string>& path) {
  json::object* node = &root;
  for (const auto& key : path) node = &node->at(key).as_object();
  return *node;
}

// entries() fails with parse_error naming the file and each of `names`.
void check_unreadable(const fs::path& directory, const std::string& file, const std::vector<std::string>& names) {
  const auto entries = open_journal(directory).entries();
  REQUIRE_FALSE(entries.ok());
  CHECK(entries.error().code == ErrorCode::parse_error);
  CHECK(contains(entries.error().message, (directory / file).string()));
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK(contains(entries.error().message, name));
  }
}

TEST_CASE("ids that cannot be file names are refused") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  for (const std::string& id : {std::string(), std::string(".hidden"), std::string("."), std::string(".."),
                                std::string("a/b"), std::string("../x"), std::string("a b"), std::string(129, 'x'),
                                std::string("caf\xc3\xa9"), std::string("a\nb")}) {
    CAPTURE(id);
    const auto written = journal.write(entry_with_id(id));
    REQUIRE_FALSE(written.ok());
    CHECK(written.error().code == ErrorCode::invalid_argument);
    CHECK(contains(written.error().message, "journal entry id"));
    const auto removed = journal.remove(id);
    REQUIRE_FALSE(removed.ok());
    CHECK(removed.error().code == ErrorCode::invalid_argument);
  }
  CHECK(fs::is_empty(dir.path()));
  CHECK(journal.write(entry_with_id(std::string(128, 'x'))).ok());
  CHECK(journal.write(entry_with_id("Op_1.create-vm1")).ok());
}

TEST_CASE("an entry that could not be read back is refused on write, naming the field") {
  TempDir dir;
  auto journal = open_journal(dir.path());
  const auto refused = [&](const JournalEntry& entry, const std::string& field) {
    CAPTURE(field);
    const auto written = journal.write(entry);
    REQUIRE_FALSE(written.ok());
    CHECK(written.error().code == ErrorCode::invalid_argument);
    CHECK(contains(written.error().message, field));
  };
  auto entry = entry_with_id("op-1");
  entry.started_at = "2026-11-29 23:00:00";
  refused(entry, "started_at");
  entry = entry_with_id("op-1");
  entry.vm.clear();
  refused(entry, "vm");
  entry = entry_with_id("op-1");
  entry.current_step = "a\x02";
  refused(entry, "current_step");
  entry = entry_with_id("op-1");
  entry.record.created_at.clear();
  refused(entry, "record.created_at");
  entry = entry_with_id("op-1");
  entry.vm = "vm2";
  refused(entry, "record.name");
  entry = entry_with_id("op-1");
  entry.current_step = "define";  // a create's step, not a delete's
  refused(entry, "current_step names \"define\", not a step of delete");
  entry = entry_with_id("op-1");
  entry.steps_done = {"destroy", "shred"};
  refused(entry, "steps_done names \"shred\"");
  for (const auto kind : {OperationKind::start, OperationKind::stop, OperationKind::reboot}) {
    entry = entry_with_id("op-1");
    entry.kind = kind;
    refused(entry, "kind \"" + std::string(to_string(kind)) + "\" is never journaled");
  }
  CHECK(fs::is_empty(dir.path()));
}

TEST_CASE("a file that is not JSON is an error naming the file") {
  TempDir dir;
  write_text_file(dir.path() / "op-1.json", "{\"id\": \"op-1\", \"kind\": ");
  check_unreadable(dir.path(), "op-1.json", {"not JSON"});
  write_text_file(dir.path() / "op-1.json", "");
  check_unreadable(dir.path(), "op-1.json", {"not JSON"});
  write_text_file(dir.path() / "op-1.json", "[1, 2]");
  check_unreadable(dir.path(), "op-1.json", {"not a JSON object"});
}

TEST_CASE("a missing field is an error naming the file and the field") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> fields = {
      {{}, "id"},
      {{}, "kind"},
      {{}, "vm"},
      {{}, "started_at"},
      {{}, "steps_done"},
      {{}, "current_step"},
      {{}, "record"},
      {{"record"}, "name"},
      {{"record"}, "template"},
      {{"record"}, "request_id"},
      {{"record"}, "created_at"},
      {{"record"}, "allocation"},
      {{"record"}, "inputs"},
      {{"record", "allocation"}, "hugepage_size"},
      {{"record", "allocation"}, "cpus"},
      {{"record", "allocation"}, "devices"},
      {{"record", "allocation"}, "hugepages"},
      {{"record", "inputs"}, "boot_image"},
      {{"record", "inputs"}, "disk_pool"},
      {{"record", "inputs"}, "disk_volume"},
      {{"record", "inputs"}, "macs"},
      {{"record", "inputs"}, "seed_iso"},
      {{"record", "inputs"}, "user_data"},
  };
  for (const auto& field : fields) {
    const auto& parents = field.first;
    const auto& key = field.second;
    std::string dotted;
    for (const auto& parent : parents) dotted += parent + ".";
    dotted += key;
    CAPTURE(dotted);
    TempDir dir;
    edit_entry(dir.path(), [&](json::object& root) { REQUIRE(object_at(root, parents).erase(key) == 1); });
    check_unreadable(dir.path(), "op-1.json", {"'" + dotted + "' is missing"});
  }
}

TEST_CASE("a field of the wrong type or value is an error naming the file and the field") {
  const auto check_edit = [](const std::function<void(json::object&)>& edit, const std::vector<std::string>& names) {
    TempDir dir;
    edit_entry(dir.path(), edit);
    check_unreadable(dir.path(), "op-1.json", names);
  };
  check_edit([](json::object& e) { e["kind"] = "migrate"; }, {"kind", "\"migrate\""});
  check_edit([](json::object& e) { e["vm"] = 7; }, {"'vm' is not a string"});
  check_edit([](json::object& e) { e["id"] = "op-2"; }, {"'id'", "\"op-2\"", "file name"});
  check_edit([](json::object& e) { e["started_at"] = "noon"; }, {"started_at", "\"noon\""});
  check_edit([](json::object& e) { e["steps_done"] = json::array{"a", 1}; }, {"'steps_done[1]' is not a string"});
  // A step this version does not know (a newer daemon's, or a corrupt file): refused, never guessed at.
  check_edit([](json::object& e) { e["current_step"] = "snapshot"; },
             {"current_step names \"snapshot\", not a step of delete (destroy, undefine, delete_disk, delete_seed, "
              "release_devices, commit)",
              "another version of hostagent", "repair or remove the file"});
  check_edit(
      [](json::object& e) {
        e["steps_done"] = json::array{"destroy", "snapshot"};
      },
      {"steps_done names \"snapshot\""});
  check_edit([](json::object& e) { e["kind"] = "stop"; }, {"kind \"stop\" is never journaled"});
  check_edit([](json::object& e) { e["record"] = "none"; }, {"'record' is not a JSON object"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "allocation"})["cpus"] = "3-1";
      },
      {"record.allocation.cpus", "3-1"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "allocation"})["devices"] = json::array{"0000:1b:00.9"};
      },
      {"record.allocation.devices[0]", "0000:1b:00.9"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "allocation"})["p2p_ports"] = json::array{"0000:1a:00.0", "1a:02"};
      },
      {"record.allocation.p2p_ports[1]", "1a:02"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "allocation"})["hugepage_size"] = -2;
      },
      {"record.allocation.hugepage_size", "negative", "-2"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "allocation"})["hugepage_size"] = 1.5;
      },
      {"record.allocation.hugepage_size", "non-negative integer"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "allocation"})["hugepages"] = json::array{json::object{{"node", 0}, {"pages", -1}}};
      },
      {"record.allocation.hugepages[0].pages", "negative"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "allocation"})["hugepages"] =
            json::array{json::object{{"node", 0}, {"pages", 1}}, json::object{{"node", 0}, {"pages", 2}}};
      },
      {"record.allocation.hugepages[1].node", "twice"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "inputs"})["user_data"] = "yes";
      },
      {"record.inputs.user_data", "true or false"});
  check_edit(
      [](json::object& e) {
        object_at(e, {"record", "inputs"})["macs"] = json::array{"52:54"};
      },
      {"record.inputs.macs[0]", "\"52:54\""});
  check_edit([](json::object& e) { object_at(e, {"record"})["name"] = "vm2"; }, {"record.name", "\"vm2\"", "\"vm1\""});
}

TEST_CASE("a file whose name is not an entry id is an error naming it") {
  TempDir dir;
  write_text_file(dir.path() / "bad name.json", "{}");
  check_unreadable(dir.path(), "bad name.json", {"not a valid entry id"});
}

TEST_CASE("one unreadable entry fails the whole read, whatever the others") {
  TempDir dir;
  REQUIRE(open_journal(dir.path()).write(entry_with_id("op-1")).ok());
  write_text_file(dir.path() / "op-2.json", "garbage");
  check_unreadable(dir.path(), "op-2.json", {"not JSON"});
}

TEST_CASE("a directory that cannot be created is an io_error naming it") {
  TempDir dir;
  write_text_file(dir.path() / "file", "a regular file");
  for (const auto& path : {dir.path() / "file" / "journal", dir.path() / "file"}) {
    CAPTURE(path);
    const auto journal = Journal::open(path);
    REQUIRE_FALSE(journal.ok());
    CHECK(journal.error().code == ErrorCode::io_error);
    CHECK(contains(journal.error().message, path.string()));
  }
  const auto empty = Journal::open("");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("a journal whose directory vanished fails cleanly") {
  TempDir dir;
  auto journal = open_journal(dir.path() / "journal");
  fs::remove(dir.path() / "journal");
  const auto written = journal.write(entry_with_id("op-1"));
  REQUIRE_FALSE(written.ok());
  CHECK(written.error().code == ErrorCode::io_error);
  CHECK(contains(written.error().message, "op-1.json.tmp"));
  const auto entries = journal.entries();
  REQUIRE_FALSE(entries.ok());
  CHECK(entries.error().code == ErrorCode::io_error);
  CHECK(contains(entries.error().message, (dir.path() / "journal").string()));
}

}  // namespace
}  // namespace hostagent::state::testing
