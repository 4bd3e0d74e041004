// common/json_fields: reading a JSON object whose every error is a parse_error naming the field's
// path ("record.inputs.macs[2]"): the form the daemon's own files (journal entries, device records)
// are read in. Nothing read from disk is trusted, so every field's type is checked here.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::json_fields {

// What a reader returns for a file or field it cannot accept: a parse_error, whose message names
// the file or field.
inline Error parse_failure(std::string what) {
  return Error{ErrorCode::parse_error, std::move(what)};
}

// One JSON object's fields. Every field is required unless has() is asked first: what the daemon
// writes, it writes whole.
class JsonFields {
 public:
  // Fails when value is not an object; path names it in messages ("" for the document).
  static Result<JsonFields> of(const boost::json::value& value, std::string path);

  Result<std::string> string(std::string_view key) const;
  Result<bool> boolean(std::string_view key) const;
  Result<uint64_t> unsigned_integer(std::string_view key) const;
  Result<int64_t> integer(std::string_view key) const;
  // A string that may be missing or null (Placement's root has "parent_provider_uuid": null): "".
  Result<std::string> optional_string(std::string_view key) const;
  Result<std::vector<std::string>> strings(std::string_view key) const;
  Result<const boost::json::array*> array(std::string_view key) const;
  Result<JsonFields> object(std::string_view key) const;
  // The object at key as the document has it, for a value kept whole rather than read.
  Result<const boost::json::object*> raw_object(std::string_view key) const;
  // The object array(key)[index] holds, its path "key[index]".
  Result<JsonFields> element(std::string_view key, std::size_t index) const;
  // Each member of this object as a JsonFields of its own, by name, in the document's order; a
  // member that is not an object fails, naming it.
  Result<std::vector<std::pair<std::string, JsonFields>>> objects() const;
  // Each member as an integer, by name: a map of counts ({"VCPU": 4}).
  Result<std::vector<std::pair<std::string, int64_t>>> integers() const;
  // Each member as a string, by name.
  Result<std::vector<std::pair<std::string, std::string>>> string_members() const;
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

// The one rule for the version of a file hostagent writes (docs/packaging.md, "Upgrades"): each
// record carries "format", its layout's version. A release reads its own format and every older
// one (an older record is read into today's values, and written in today's format at its next
// write), and refuses a newer one with a parse_error naming both versions: what a newer release
// meant is never guessed, and the file is never rewritten or removed by a release that cannot
// read it. A record without "format" is format 0, as the releases before formats wrote it.
inline constexpr std::string_view kFormatKey = "format";
Result<int64_t> format_version(const JsonFields& fields, int64_t current);
// The same rule for a version read elsewhere (an XML attribute): `format` itself, or the refusal.
Result<int64_t> checked_format(int64_t format, int64_t current);

}  // namespace hostagent::json_fields
