// Device records (state/device_records): what device preparation changed, as JSON files read back
// whole or refused with the file and the field named, in a directory only root may write.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hostagent/devices/device_records.hpp"
#include "record_formats.hpp"
#include "test_support.hpp"

namespace hostagent::devices {
namespace {

namespace fs = std::filesystem;
using hostagent::testing::TempDir;
using hostagent::testing::write_text_file;
using Register = vfio::RegisterChange::Register;

numa::PciAddress at(const char* text) {
  return numa::PciAddress::parse(text).value();
}

// Every kind of value a record holds: a group with a function that was unbound and one already on
// vfio-pci, a VF asked for every setting and one asked for none, the previous state with and
// without the settings a driver may not report, and both registers.
DeviceRecord full_record(const std::string& owner) {
  DeviceRecord record;
  record.owner = owner;
  record.groups.push_back(vfio::GroupBinding{
      41, {{at("0000:18:00.0"), "nvidia", "", false}, {at("0000:18:00.1"), "", "snd_hda_intel", false}}});
  record.groups.push_back(vfio::GroupBinding{57, {{at("0000:19:00.1"), "vfio-pci", "vfio-pci", true}}});
  sriov::VfSettings all;
  all.mac = "52:54:00:12:34:56";
  all.vlan = 100;
  all.qos = 3;
  all.trust = true;
  all.spoofchk = false;
  all.link_state = sriov::LinkState::disable;
  all.min_tx_rate_mbps = 1000;
  all.max_tx_rate_mbps = 4294967295U;
  sriov::VfState previous;
  previous.mac = "02:00:00:00:00:01";
  previous.vlan = 7;
  previous.qos = 1;
  previous.trust = false;
  previous.spoofchk = true;
  previous.link_state = sriov::LinkState::enable;
  previous.min_tx_rate_mbps = 10;
  previous.max_tx_rate_mbps = 20;
  record.vfs.push_back(sriov::VfConfigRecord{"ens1np0", 0, all, previous});
  record.vfs.push_back(sriov::VfConfigRecord{"ens2np0", 3, sriov::VfSettings{}, sriov::VfState{}});
  record.p2p = {{at("0000:15:02.0"), Register::acs_control, 0x001d, 0x005d},
                {at("0000:18:00.0"), Register::ats_control, 0x0000, 0x8000}};
  return record;
}

// DeviceRecord's defaulted == is deleted: vfio::GroupBinding and BoundFunction have none. Field
// by field, so that a field from_json drops or changes shows.
bool same(const Result<std::optional<DeviceRecord>>& read, const DeviceRecord& b) {
  return read.ok() && read->has_value() && **read == b;
}

DeviceRecords open_records(const fs::path& directory) {
  auto records = DeviceRecords::open(directory);
  REQUIRE_MESSAGE(records.ok(), records.error().message);
  return std::move(records).value();
}

using hostagent::testing::contains;

// The record's JSON with the first `from` replaced by `to`: one field broken, the rest as written.
std::string edited(const DeviceRecord& record, const std::string& from, const std::string& to) {
  std::string text = device_record_to_json(record);
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from << " not in " << text);
  return text.replace(at, from.size(), to);
}

std::vector<std::string> owners(const std::vector<DeviceRecord>& records) {
  std::vector<std::string> out;
  out.reserve(records.size());
  for (const auto& r : records) out.push_back(r.owner);
  return out;
}

TEST_CASE("a device record survives JSON and back with every field, set and unset") {
  const auto record = full_record("train-0");
  const auto back = device_record_from_json(device_record_to_json(record), "test");
  REQUIRE_MESSAGE(back.ok(), back.error().message);
  CHECK(*back == record);
  CHECK_FALSE(back->vfs[1].applied.mac.has_value());
  CHECK_FALSE(back->vfs[1].previous.trust.has_value());
  CHECK(back->vfs[0].applied.max_tx_rate_mbps == 4294967295U);

  DeviceRecord empty;
  empty.owner = kHostDeviceOwner;
  const auto empty_back = device_record_from_json(device_record_to_json(empty), "test");
  REQUIRE_MESSAGE(empty_back.ok(), empty_back.error().message);
  CHECK(*empty_back == empty);
}

TEST_CASE("records are written, read, replaced, listed by owner and removed") {
  TempDir dir;
  auto records = open_records(dir.path() / "devices");
  CHECK_FALSE(records.read("vm-a").value().has_value());
  REQUIRE(records.write(full_record("vm-b")).ok());
  REQUIRE(records.write(full_record("vm-a")).ok());
  DeviceRecord host;
  host.owner = kHostDeviceOwner;
  host.groups = full_record("x").groups;
  REQUIRE(records.write(host).ok());
  // Not records: skipped by all(), whatever they hold.
  write_text_file(records.directory() / "notes.txt", "{");
  write_text_file(records.directory() / ".devices.json", "{");
  write_text_file(records.directory() / "vm-c.devices.json.tmp", "{");

  const auto all = records.all();
  REQUIRE_MESSAGE(all.ok(), all.error().message);
  CHECK(owners(*all) == std::vector<std::string>{kHostDeviceOwner, "vm-a", "vm-b"});
  CHECK((*all)[0] == host);
  CHECK((*all)[1] == full_record("vm-a"));

  auto changed = full_record("vm-a");
  changed.vfs.clear();
  changed.p2p.pop_back();
  REQUIRE(records.write(changed).ok());
  CHECK(same(records.read("vm-a"), changed));

  REQUIRE(records.remove("vm-a").ok());
  CHECK_FALSE(records.read("vm-a").value().has_value());
  CHECK(records.remove("vm-a").ok());  // already gone
  CHECK(owners(records.all().value()) == std::vector<std::string>{kHostDeviceOwner, "vm-b"});
  // The host's record and a VM's are separate files: removing one leaves the other.
  REQUIRE(records.remove("vm-b").ok());
  CHECK(same(records.read(kHostDeviceOwner), host));
}

TEST_CASE("the records directory is created and kept mode 0700") {
  TempDir dir;
  const fs::path nested = dir.path() / "state" / "devices";
  open_records(nested);
  struct stat st {};
  REQUIRE(::stat(nested.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);

  const fs::path loose = dir.path() / "loose";
  fs::create_directory(loose);
  fs::permissions(loose, fs::perms::owner_all | fs::perms::group_all | fs::perms::others_read | fs::perms::others_exec);
  open_records(loose);
  REQUIRE(::stat(loose.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
}

struct BadCase {
  std::string what;
  std::string from;
  std::string to;
  std::string field;  // what the message must name
};

TEST_CASE("a record with a bad field is refused naming the file and the field") {
  const auto record = full_record("vm-a");
  const std::vector<BadCase> cases{
      {"driver name with a path", "\"original_driver\":\"nvidia\"", "\"original_driver\":\"../x\"",
       "groups[0].functions[0].original_driver"},
      {"override with a slash", "\"original_override\":\"snd_hda_intel\"", "\"original_override\":\"a/b\"",
       "groups[0].functions[1]"},
      {"netdev with a slash", "\"pf_netdev\":\"ens1np0\"", "\"pf_netdev\":\"ens1/np0\"", "vfs[0].pf_netdev"},
      {"netdev too long", "\"pf_netdev\":\"ens2np0\"", "\"pf_netdev\":\"ens2np0ens2np0ens2\"", "vfs[1].pf_netdev"},
      {"function address", "\"address\":\"0000:18:00.0\"", "\"address\":\"0000:18:00.9\"",
       "groups[0].functions[0].address"},
      {"register device", "\"device\":\"0000:15:02.0\"", "\"device\":\"../../15:02.0\"", "p2p[0].device"},
      {"register name", "\"register\":\"acs_control\"", "\"register\":\"acs\"", "p2p[0].register"},
      {"VLAN above 4095", "\"vlan\":100", "\"vlan\":4096", "vfs[0].applied.vlan"},
      {"link state", "\"link_state\":\"disable\"", "\"link_state\":\"down\"", "vfs[0].applied.link_state"},
      {"MAC applied", "\"mac\":\"52:54:00:12:34:56\"", "\"mac\":\"52:54:00:12:34\"", "vfs[0].applied.mac"},
      {"MAC previous", "\"mac\":\"02:00:00:00:00:01\"", "\"mac\":\"x\"", "vfs[0].previous.mac"},
      {"owner not a VM name", "\"owner\":\"vm-a\"", "\"owner\":\"../vm-a\"", "owner"},
      {"missing field", ",\"was_vfio\":false", "", "groups[0].functions[0].was_vfio"},
      {"broken JSON", "\"groups\":[", "\"groups\":", "not JSON"},
  };
  TempDir dir;
  auto records = open_records(dir.path());
  const fs::path file = dir.path() / "vm-a.devices.json";
  for (const auto& bad : cases) {
    CAPTURE(bad.what);
    write_text_file(file, edited(record, bad.from, bad.to));
    const auto read = records.read("vm-a");
    REQUIRE_FALSE(read.ok());
    CHECK(read.error().code == ErrorCode::parse_error);
    CHECK_MESSAGE(contains(read.error().message, file.string()), read.error().message);
    CHECK_MESSAGE(contains(read.error().message, bad.field), read.error().message);
    // all() refuses it the same way: a release must not guess.
    const auto all = records.all();
    REQUIRE_FALSE(all.ok());
    CHECK_MESSAGE(contains(all.error().message, file.string()), all.error().message);
  }
}

TEST_CASE("a record filed under another owner's name is refused by read and by all") {
  TempDir dir;
  auto records = open_records(dir.path());
  REQUIRE(records.write(full_record("vm-b")).ok());
  const fs::path file = dir.path() / "vm-a.devices.json";
  write_text_file(file, device_record_to_json(full_record("vm-b")));
  const auto read = records.read("vm-a");
  REQUIRE_FALSE(read.ok());
  CHECK_MESSAGE(contains(read.error().message, file.string()), read.error().message);
  CHECK_MESSAGE(contains(read.error().message, "\"vm-b\""), read.error().message);
  // Listed, it would be undone as vm-b's and never removed (removing vm-b's record removes the other
  // file), so every later start would undo it again.
  const auto all = records.all();
  REQUIRE_FALSE(all.ok());
  CHECK_MESSAGE(contains(all.error().message, file.string()), all.error().message);
}

TEST_CASE("the host's record and VM records live side by side") {
  TempDir dir;
  auto records = open_records(dir.path());
  DeviceRecord host;
  host.owner = kHostDeviceOwner;
  host.groups = full_record("x").groups;
  REQUIRE(records.write(host).ok());
  REQUIRE(records.write(full_record("train-0")).ok());
  CHECK(same(records.read(kHostDeviceOwner), host));
  CHECK(same(records.read("train-0"), full_record("train-0")));
  REQUIRE(records.remove(kHostDeviceOwner).ok());
  CHECK(owners(records.all().value()) == std::vector<std::string>{"train-0"});
}

TEST_CASE("a device record without a format is the release before's, and a newer format is refused") {
  TempDir dir;
  auto records = open_records(dir.path() / "devices");
  REQUIRE(records.write(full_record("vm-a")).ok());
  hostagent::testing::check_format_rule(records.directory() / "vm-a.devices.json", kDeviceRecordFormat,
                                        [&] { return records.read("vm-a"); });
}

}  // namespace
}  // namespace hostagent::devices
