// The format rule (common/json_fields format_version) checked on one JSON record file a test has
// just written through its writer: read as written; the same file without "format" (what the
// releases before formats wrote) read into the same values; with a newer format refused, naming
// the file and the version, and the file left as it was (a release never rewrites or removes what
// it cannot read).
#pragma once

#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <string>

#include "test_support.hpp"

namespace hostagent::testing {

// `read` reads the record back (a Result of a value with operator==); `format` is its writer's.
template <typename Read>
void check_format_rule(const std::filesystem::path& file, int format, Read read) {
  CAPTURE(file.string());
  const std::string written = read_text_file(file);
  auto document = boost::json::parse(written).as_object();
  REQUIRE(document.contains("format"));
  CHECK(document.at("format") == format);
  const auto as_written = read();
  REQUIRE_MESSAGE(as_written.ok(), as_written.error().message);

  document.erase("format");
  write_text_file(file, boost::json::serialize(document) + "\n");
  const auto older = read();
  REQUIRE_MESSAGE(older.ok(), older.error().message);
  CHECK(*older == *as_written);

  document["format"] = format + 1;
  const std::string newer_text = boost::json::serialize(document) + "\n";
  write_text_file(file, newer_text);
  const auto newer = read();
  REQUIRE_FALSE(newer.ok());
  CHECK(newer.error().code == ErrorCode::parse_error);
  CHECK_MESSAGE(newer.error().message.find(file.string()) != std::string::npos, newer.error().message);
  const std::string words = "format " + std::to_string(format + 1) + " is newer than this hostagent reads";
  CHECK_MESSAGE(newer.error().message.find(words) != std::string::npos, newer.error().message);
  CHECK(read_text_file(file) == newer_text);
}

}  // namespace hostagent::testing
