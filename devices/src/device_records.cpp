// devices/device_records: device preparation's records as JSON files, written ahead of each change.
#include "hostagent/devices/device_records.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdint>
#include <regex>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/json_fields.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"

namespace hostagent::devices {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using json_fields::JsonFields;
using json_fields::parse_failure;

constexpr std::size_t kMaxRecordBytes = 4 << 20;
constexpr const char* kRecordSuffix = ".devices.json";

// Names that become sysfs path components (drivers/NAME/bind) or netlink names: what the kernel
// allows for a driver name, and IFNAMSIZ-1 bytes without '/' or whitespace for a netdev.
bool driver_name_ok(const std::string& name) {
  static const std::regex kDriver("[A-Za-z0-9_.-]{0,64}");
  return std::regex_match(name, kDriver) && name != "." && name != "..";
}
bool netdev_name_ok(const std::string& name) {
  static const std::regex kNetdev("[A-Za-z0-9_.:@-]{1,15}");
  return std::regex_match(name, kNetdev) && name != "." && name != "..";
}
bool owner_ok(const std::string& owner) {
  return owner == kHostDeviceOwner || is_name(owner);
}

json::object settings_to_json(const sriov::VfSettings& s) {
  json::object out;
  if (s.mac) out["mac"] = *s.mac;
  if (s.vlan) out["vlan"] = *s.vlan;
  if (s.qos) out["qos"] = *s.qos;
  if (s.trust) out["trust"] = *s.trust;
  if (s.spoofchk) out["spoofchk"] = *s.spoofchk;
  if (s.link_state) out["link_state"] = sriov::to_string(*s.link_state);
  if (s.min_tx_rate_mbps) out["min_tx_rate_mbps"] = *s.min_tx_rate_mbps;
  if (s.max_tx_rate_mbps) out["max_tx_rate_mbps"] = *s.max_tx_rate_mbps;
  return out;
}

json::object state_to_json(const sriov::VfState& s) {
  json::object out{{"mac", s.mac},
                   {"vlan", s.vlan},
                   {"qos", s.qos},
                   {"min_tx_rate_mbps", s.min_tx_rate_mbps},
                   {"max_tx_rate_mbps", s.max_tx_rate_mbps}};
  if (s.trust) out["trust"] = *s.trust;
  if (s.spoofchk) out["spoofchk"] = *s.spoofchk;
  if (s.link_state) out["link_state"] = sriov::to_string(*s.link_state);
  return out;
}

json::object group_to_json(const vfio::GroupBinding& group) {
  json::array functions;
  for (const auto& f : group.functions) {
    functions.emplace_back(json::object{{"address", f.address.to_string()},
                                        {"original_driver", f.original_driver},
                                        {"original_override", f.original_override},
                                        {"was_vfio", f.was_vfio}});
  }
  return json::object{{"group", group.group}, {"functions", std::move(functions)}};
}

json::object change_to_json(const vfio::RegisterChange& c) {
  return json::object{
      {"device", c.device.to_string()},
      {"register", c.reg == vfio::RegisterChange::Register::acs_control ? "acs_control" : "ats_control"},
      {"before", c.before},
      {"after", c.after}};
}

Result<PciAddress> address_field(const JsonFields& fields, std::string_view key) {
  HA_TRY(const auto text, fields.string(key));
  auto address = PciAddress::parse(text);
  if (!address.ok())
    return parse_failure("field '" + fields.path(key) + "' is not a PCI address: " + text::quoted(text));
  return *address;
}

Result<uint64_t> bounded(const JsonFields& fields, std::string_view key, uint64_t high) {
  HA_TRY(const auto value, fields.unsigned_integer(key));
  if (value > high) return parse_failure("field '" + fields.path(key) + "' is above " + std::to_string(high));
  return value;
}

Result<std::optional<sriov::LinkState>> link_state_field(const JsonFields& fields) {
  if (!fields.has("link_state")) return std::optional<sriov::LinkState>{};
  HA_TRY(const auto text, fields.string("link_state"));
  for (auto state : {sriov::LinkState::automatic, sriov::LinkState::enable, sriov::LinkState::disable}) {
    if (text == sriov::to_string(state)) return std::optional<sriov::LinkState>{state};
  }
  return parse_failure("field '" + fields.path("link_state") + "' is not a link state: " + text::quoted(text));
}

Result<std::optional<bool>> optional_bool(const JsonFields& fields, std::string_view key) {
  if (!fields.has(key)) return std::optional<bool>{};
  HA_TRY(const auto value, fields.boolean(key));
  return std::optional<bool>{value};
}

template <typename T>
Result<std::optional<T>> optional_number(const JsonFields& fields, std::string_view key, uint64_t high) {
  if (!fields.has(key)) return std::optional<T>{};
  HA_TRY(const auto value, bounded(fields, key, high));
  return std::optional<T>{static_cast<T>(value)};
}

template <typename T>
Result<T> number(const JsonFields& fields, std::string_view key, uint64_t high) {
  HA_TRY(const auto value, bounded(fields, key, high));
  return static_cast<T>(value);
}

// A MAC goes into a netlink request: six hex octets, as the configurator would take it.
Result<std::string> mac_field(const JsonFields& f) {
  HA_TRY(auto text, f.string("mac"));
  if (!mac_text(text, f.path("mac")).ok()) {
    return parse_failure("field '" + f.path("mac") + "' is not a MAC address: " + text::quoted(text));
  }
  return text;
}

Result<sriov::VfSettings> settings_from_json(const JsonFields& f) {
  sriov::VfSettings s;
  if (f.has("mac")) {
    HA_TRY(s.mac, mac_field(f));
  }
  HA_TRY(s.vlan, optional_number<int>(f, "vlan", 4095));
  HA_TRY(s.qos, optional_number<int>(f, "qos", 7));
  HA_TRY(s.trust, optional_bool(f, "trust"));
  HA_TRY(s.spoofchk, optional_bool(f, "spoofchk"));
  HA_TRY(s.link_state, link_state_field(f));
  HA_TRY(s.min_tx_rate_mbps, optional_number<uint32_t>(f, "min_tx_rate_mbps", UINT32_MAX));
  HA_TRY(s.max_tx_rate_mbps, optional_number<uint32_t>(f, "max_tx_rate_mbps", UINT32_MAX));
  return s;
}

Result<sriov::VfState> state_from_json(const JsonFields& f) {
  sriov::VfState s;
  HA_TRY(s.mac, mac_field(f));
  HA_TRY(s.vlan, number<int>(f, "vlan", 4095));
  HA_TRY(s.qos, number<int>(f, "qos", 7));
  HA_TRY(s.trust, optional_bool(f, "trust"));
  HA_TRY(s.spoofchk, optional_bool(f, "spoofchk"));
  HA_TRY(s.link_state, link_state_field(f));
  HA_TRY(s.min_tx_rate_mbps, number<uint32_t>(f, "min_tx_rate_mbps", UINT32_MAX));
  HA_TRY(s.max_tx_rate_mbps, number<uint32_t>(f, "max_tx_rate_mbps", UINT32_MAX));
  return s;
}

Result<vfio::BoundFunction> function_from_json(const JsonFields& f) {
  vfio::BoundFunction out;
  HA_TRY(out.address, address_field(f, "address"));
  HA_TRY(out.original_driver, f.string("original_driver"));
  HA_TRY(out.original_override, f.string("original_override"));
  HA_TRY(out.was_vfio, f.boolean("was_vfio"));
  if (!driver_name_ok(out.original_driver) || !driver_name_ok(out.original_override)) {
    return parse_failure("field '" + f.path("original_driver") + "' or its override is not a driver name");
  }
  return out;
}

Result<vfio::GroupBinding> group_from_json(const JsonFields& f) {
  vfio::GroupBinding out;
  HA_TRY(out.group, number<int>(f, "group", INT32_MAX));
  HA_TRY(const auto* functions, f.array("functions"));
  for (std::size_t i = 0; i < functions->size(); ++i) {
    HA_TRY(const auto item, JsonFields::of((*functions)[i], f.path("functions") + "[" + std::to_string(i) + "]"));
    HA_TRY(auto function, function_from_json(item));
    out.functions.push_back(std::move(function));
  }
  return out;
}

Result<sriov::VfConfigRecord> vf_from_json(const JsonFields& f) {
  sriov::VfConfigRecord out;
  HA_TRY(out.pf_netdev, f.string("pf_netdev"));
  if (!netdev_name_ok(out.pf_netdev)) return parse_failure("field '" + f.path("pf_netdev") + "' is not a netdev name");
  HA_TRY(out.vf, number<int>(f, "vf", 65535));
  HA_TRY(const auto applied, f.object("applied"));
  HA_TRY(out.applied, settings_from_json(applied));
  HA_TRY(const auto previous, f.object("previous"));
  HA_TRY(out.previous, state_from_json(previous));
  return out;
}

Result<vfio::RegisterChange> change_from_json(const JsonFields& f) {
  vfio::RegisterChange out;
  HA_TRY(out.device, address_field(f, "device"));
  HA_TRY(const auto reg, f.string("register"));
  if (reg == "acs_control") {
    out.reg = vfio::RegisterChange::Register::acs_control;
  } else if (reg == "ats_control") {
    out.reg = vfio::RegisterChange::Register::ats_control;
  } else {
    return parse_failure("field '" + f.path("register") + "' is not acs_control or ats_control: " + text::quoted(reg));
  }
  HA_TRY(out.before, number<uint16_t>(f, "before", UINT16_MAX));
  HA_TRY(out.after, number<uint16_t>(f, "after", UINT16_MAX));
  return out;
}

template <typename T, typename Read>
Status read_items(const JsonFields& fields, std::string_view key, std::vector<T>& out, Read read) {
  HA_TRY(const auto* items, fields.array(key));
  for (std::size_t i = 0; i < items->size(); ++i) {
    HA_TRY(const auto item, JsonFields::of((*items)[i], fields.path(key) + "[" + std::to_string(i) + "]"));
    HA_TRY(auto value, read(item));
    out.push_back(std::move(value));
  }
  return ok_status();
}

std::string file_name(const std::string& owner) {
  return owner + kRecordSuffix;
}

}  // namespace

std::string device_record_to_json(const DeviceRecord& record) {
  json::array groups;
  for (const auto& g : record.groups) groups.emplace_back(group_to_json(g));
  json::array vfs;
  for (const auto& v : record.vfs) {
    vfs.emplace_back(json::object{{"pf_netdev", v.pf_netdev},
                                  {"vf", v.vf},
                                  {"applied", settings_to_json(v.applied)},
                                  {"previous", state_to_json(v.previous)}});
  }
  json::array p2p;
  for (const auto& c : record.p2p) p2p.emplace_back(change_to_json(c));
  return json::serialize(json::object{{"format", kDeviceRecordFormat},
                                      {"owner", record.owner},
                                      {"groups", std::move(groups)},
                                      {"vfs", std::move(vfs)},
                                      {"p2p", std::move(p2p)}});
}

Result<DeviceRecord> device_record_from_json(const std::string& text, const std::string& source) {
  std::error_code ec;
  const json::value document = json::parse(text, ec);
  if (ec) return parse_failure(source + ": not JSON: " + ec.message());
  auto parsed = [&]() -> Result<DeviceRecord> {
    HA_TRY(const auto fields, JsonFields::of(document, ""));
    HA_TRY_STATUS(json_fields::format_version(fields, kDeviceRecordFormat));
    DeviceRecord record;
    HA_TRY(record.owner, fields.string("owner"));
    if (!owner_ok(record.owner)) return parse_failure("field 'owner' is not a VM name: " + record.owner);
    HA_TRY_STATUS(read_items(fields, "groups", record.groups, group_from_json));
    HA_TRY_STATUS(read_items(fields, "vfs", record.vfs, vf_from_json));
    HA_TRY_STATUS(read_items(fields, "p2p", record.p2p, change_from_json));
    return record;
  }();
  if (!parsed.ok()) return parse_failure(source + ": " + parsed.error().message);
  return parsed;
}

Result<DeviceRecords> DeviceRecords::open(const fs::path& directory) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) return errno_error(ec.value(), "create directory", directory.string());
  // Records name drivers that a release binds: nobody else may write them.
  if (::chmod(directory.c_str(), 0700) != 0) return errno_error(errno, "chmod 0700", directory.string());
  return DeviceRecords(directory);
}

Status DeviceRecords::write(const DeviceRecord& record) {
  HA_ASSERT(owner_ok(record.owner));
  return durable::replace_file(directory_ / file_name(record.owner), device_record_to_json(record));
}

Status DeviceRecords::remove(const std::string& owner) {
  HA_ASSERT(owner_ok(owner));
  return durable::remove_file(directory_ / file_name(owner));
}

Result<std::optional<DeviceRecord>> DeviceRecords::read(const std::string& owner) const {
  HA_ASSERT(owner_ok(owner));
  const fs::path path = directory_ / file_name(owner);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<DeviceRecord>{};
  HA_TRY(const auto text, durable::read_file(path, kMaxRecordBytes));
  HA_TRY(auto record, device_record_from_json(text, path.string()));
  if (record.owner != owner)
    return parse_failure(path.string() + ": names owner " + text::quoted(record.owner) + ", not " +
                         text::quoted(owner));
  return std::optional<DeviceRecord>{std::move(record)};
}

Result<std::vector<DeviceRecord>> DeviceRecords::all() const {
  std::vector<DeviceRecord> out;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > std::string(kRecordSuffix).size() && name.ends_with(kRecordSuffix)) files.push_back(entry.path());
  }
  if (ec) return errno_error(ec.value(), "list", directory_.string());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    HA_TRY(const auto text, durable::read_file(path, kMaxRecordBytes));
    HA_TRY(auto record, device_record_from_json(text, path.string()));
    // A record filed under another name would be undone as its owner's and then never removed
    // (remove() goes by the owner's name): every later start would undo it again.
    if (path.filename().string() != file_name(record.owner)) {
      return parse_failure(path.string() + ": names owner " + text::quoted(record.owner) + ", which is filed as " +
                           file_name(record.owner));
    }
    out.push_back(std::move(record));
  }
  return out;
}

}  // namespace hostagent::devices
