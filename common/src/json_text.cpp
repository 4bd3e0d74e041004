// common/json_text: a SAX pass (boost::json::basic_parser) that remembers each open object's keys,
// then the ordinary parse.
#include "hostagent/common/json_text.hpp"

#include <set>
#include <vector>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse.hpp>

namespace hostagent::json_text {
namespace {

// The handler boost::json::basic_parser calls; every callback returns true (go on) except on_key
// once a repeat is found, which stops the parse there.
struct DuplicateFinder {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  struct Level {
    bool object = false;
    std::set<std::string> keys;  // an object's, so far
    std::string key;             // the key being read, then the member's
    std::size_t index = 0;       // an array's next element
  };
  std::vector<Level> levels;
  std::string found;  // the repeat's path, once found

  std::string path() const {
    std::string out;
    for (const auto& level : levels) {
      if (level.object) {
        out += (out.empty() ? "" : ".") + level.key;
      } else {
        out += "[" + std::to_string(level.index) + "]";
      }
    }
    return out;
  }
  // A value completes an array's element.
  bool value() {
    if (!levels.empty() && !levels.back().object) ++levels.back().index;
    return true;
  }
  // A member's value ends the key it belonged to; the next key starts empty.
  bool member_value() {
    if (!levels.empty() && levels.back().object) levels.back().key.clear();
    return value();
  }
  bool begin(bool object) {
    levels.push_back(Level{object, {}, "", 0});
    return true;
  }
  bool end() {
    levels.pop_back();
    return member_value();
  }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_object_begin(boost::system::error_code&) { return begin(true); }
  bool on_object_end(std::size_t, boost::system::error_code&) { return end(); }
  bool on_array_begin(boost::system::error_code&) { return begin(false); }
  bool on_array_end(std::size_t, boost::system::error_code&) { return end(); }
  bool on_key_part(std::string_view part, std::size_t, boost::system::error_code&) {
    levels.back().key.append(part);
    return true;
  }
  bool on_key(std::string_view part, std::size_t, boost::system::error_code& ec) {
    Level& level = levels.back();
    level.key.append(part);
    if (!level.keys.insert(level.key).second) {
      found = path();
      ec = boost::json::error::syntax;  // any error: it stops the parse, and is not reported
      return false;
    }
    return true;
  }
  bool on_string_part(std::string_view, std::size_t, boost::system::error_code&) { return true; }
  bool on_string(std::string_view, std::size_t, boost::system::error_code&) { return member_value(); }
  bool on_number_part(std::string_view, boost::system::error_code&) { return true; }
  bool on_int64(int64_t, std::string_view, boost::system::error_code&) { return member_value(); }
  bool on_uint64(uint64_t, std::string_view, boost::system::error_code&) { return member_value(); }
  bool on_double(double, std::string_view, boost::system::error_code&) { return member_value(); }
  bool on_bool(bool, boost::system::error_code&) { return member_value(); }
  bool on_null(boost::system::error_code&) { return member_value(); }
  bool on_comment_part(std::string_view, boost::system::error_code&) { return true; }
  bool on_comment(std::string_view, boost::system::error_code&) { return true; }
};

}  // namespace

std::string duplicate_key(std::string_view text) {
  boost::json::basic_parser<DuplicateFinder> parser(boost::json::parse_options{});
  boost::system::error_code ec;
  parser.write_some(false, text.data(), text.size(), ec);
  return parser.handler().found;
}

Result<boost::json::value> parse(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value value = boost::json::parse(text, ec);
  if (ec) return Error{ErrorCode::invalid_argument, "not valid JSON (" + ec.message() + ")"};
  if (auto repeated = duplicate_key(text); !repeated.empty()) {
    return field_error(repeated, "this key appears twice in one object; send each key once");
  }
  return value;
}

}  // namespace hostagent::json_text
