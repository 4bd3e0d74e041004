// state/record_json: the VM record as JSON, for the journal, and a reader for JSON objects whose
// every error names the field's path ("record.inputs.macs[2]"). Fields mirror the XML record.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/state/vm_record.hpp"

namespace hostagent::state::detail {

// One JSON object's fields. Every field is required: what the journal writes, it writes whole.
class JsonFields {
 public:
  // Fails when value is not an object; path names it in messages ("" for the document).
  static Result<JsonFields> of(const boost::json::value& value, std::string path);

  Result<std::string> string(std::string_view key) const;
  Result<bool> boolean(std::string_view key) const;
  Result<uint64_t> unsigned_integer(std::string_view key) const;
  Result<std::vector<std::string>> strings(std::string_view key) const;
  Result<const boost::json::array*> array(std::string_view key) const;
  Result<JsonFields> object(std::string_view key) const;
  std::string path(std::string_view key) const;
  // For the few optional fields (a VF setting nobody asked for): written only when set.
  bool has(std::string_view key) const { return object_->contains(key); }

 private:
  JsonFields(const boost::json::object* object, std::string path) : object_(object), path_(std::move(path)) {}
  Result<const boost::json::value*> field(std::string_view key) const;
  Error wrong_type(std::string_view key, const char* expected) const;

  const boost::json::object* object_;
  std::string path_;
};

boost::json::object record_to_json(const VmRecord& record);
// Reads a record written by record_to_json; errors are parse_error naming the field under `fields`.
Result<VmRecord> record_from_json(const JsonFields& fields);

}  // namespace hostagent::state::detail
