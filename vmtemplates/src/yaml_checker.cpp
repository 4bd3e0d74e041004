// vmtemplates/checker (private): the typed readers and the wording of their messages.
#include "hostagent/vmtemplates/yaml_checker.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>

#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/vmtemplates/quantity.hpp"

namespace hostagent::vmtemplates::yaml {
namespace {

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Optimal string alignment distance, case-insensitive: a swapped pair ("memroy") is one typo.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// A scalar as a message shows it: a pasted cloud-init script must not flood the message, and
// control characters are escaped (a message is one line per problem).
constexpr std::size_t kLongestExcerpt = 40;

std::string suggestion(std::string_view word, const std::vector<std::string_view>& candidates) {
  const auto near = closest(word, candidates);
  return near ? " (did you mean \"" + *near + "\"?)" : "";
}

}  // namespace

std::optional<std::string> closest(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto candidate : candidates) {
    const std::size_t allowed = std::clamp<std::size_t>(candidate.size() / 3, 1, 3);
    // The distance is at least the difference in length: a word far longer than every choice (a
    // pasted script as a key) costs nothing, not a table of its length times each choice's.
    const std::size_t longer = std::max(word.size(), candidate.size());
    if (longer - std::min(word.size(), candidate.size()) > allowed) continue;
    const std::size_t distance = edit_distance(word, candidate);
    if (distance > allowed || (best && distance >= best_distance)) continue;
    best = std::string(candidate);
    best_distance = distance;
  }
  return best;
}

std::string join_choices(const std::vector<std::string_view>& choices) {
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += choices[i];
  }
  return out;
}

std::string describe(const Value& value) {
  switch (value.kind) {
    case Value::Kind::scalar:
      return text::quoted(value.scalar, kLongestExcerpt);
    case Value::Kind::list:
      return "a list";
    case Value::Kind::mapping:
      return "a mapping";
    case Value::Kind::null:
      break;
  }
  return "nothing";
}

void Checker::report(const Location& at, const std::string& path, const std::string& found,
                     const std::string& expected) {
  problems_.push_back({at, (path.empty() ? "" : path + ": ") + "found " + found + ", expected " + expected});
}

void Checker::report_missing(const Value& mapping, const std::string& path, const std::string& expected) {
  report(mapping.at, path, "nothing (the key is missing)", expected);
}

bool Checker::mapping(const Value& value, const std::string& path, const std::vector<std::string_view>& allowed) {
  if (value.kind != Value::Kind::mapping) {
    report(value.at, path, describe(value), "a mapping with keys " + join_choices(allowed));
    return false;
  }
  for (const Entry& entry : value.entries) {
    if (std::find(allowed.begin(), allowed.end(), entry.key) != allowed.end()) continue;
    report(entry.key_at, path.empty() ? entry.key : path + "." + entry.key, "an unknown key",
           "one of " + join_choices(allowed) + suggestion(entry.key, allowed));
  }
  return true;
}

std::optional<int> Checker::whole(const Value& value, const std::string& path, int low, int high) {
  if (value.is_null()) return std::nullopt;
  const std::string expected = "a whole number " + std::to_string(low) + ".." + std::to_string(high);
  static const std::regex kDecimal("0|[1-9][0-9]{0,8}");  // no sign, no leading zero: 0100 is octal in YAML 1.1
  int number = 0;
  if (value.kind != Value::Kind::scalar || !std::regex_match(value.scalar, kDecimal)) {
    report(value.at, path, describe(value), expected);
    return std::nullopt;
  }
  std::from_chars(value.scalar.data(), value.scalar.data() + value.scalar.size(), number);
  if (number < low || number > high) {
    report(value.at, path, value.scalar, expected);
    return std::nullopt;
  }
  return number;
}

std::optional<bool> Checker::boolean(const Value& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  // YAML 1.1's spellings, which yaml-cpp and most engineers' habits accept.
  static const std::regex kTrue("true|True|TRUE|yes|Yes|YES|on|On|ON");
  static const std::regex kFalse("false|False|FALSE|no|No|NO|off|Off|OFF");
  if (value.kind == Value::Kind::scalar && std::regex_match(value.scalar, kTrue)) return true;
  if (value.kind == Value::Kind::scalar && std::regex_match(value.scalar, kFalse)) return false;
  report(value.at, path, describe(value), "true or false");
  return std::nullopt;
}

std::optional<std::string> Checker::text(const Value& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  if (value.kind == Value::Kind::scalar) return value.scalar;
  report(value.at, path, describe(value), "text");
  return std::nullopt;
}

std::optional<std::string> Checker::choice(const Value& value, const std::string& path,
                                           const std::vector<std::string_view>& allowed) {
  if (value.is_null()) return std::nullopt;
  if (value.kind == Value::Kind::scalar && std::find(allowed.begin(), allowed.end(), value.scalar) != allowed.end()) {
    return value.scalar;
  }
  const std::string hint = value.kind == Value::Kind::scalar ? suggestion(value.scalar, allowed) : "";
  report(value.at, path, describe(value), join_choices(allowed) + hint);
  return std::nullopt;
}

std::optional<uint64_t> Checker::byte_size(const Value& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  const std::string expected = "a size like 1792GiB, 1280GB or 1G";
  if (value.kind != Value::Kind::scalar) {
    report(value.at, path, describe(value), expected);
    return std::nullopt;
  }
  const auto size = read_byte_size(value.scalar);
  if (!size.bytes) {
    report(value.at, path, text::quoted(value.scalar, kLongestExcerpt) + " (" + size.why + ")", expected);
    return std::nullopt;
  }
  return size.bytes;
}

std::optional<uint16_t> Checker::pci_id(const Value& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  static const std::regex kHex("0x[0-9a-fA-F]{1,4}");
  if (value.kind != Value::Kind::scalar || !std::regex_match(value.scalar, kHex)) {
    report(value.at, path, describe(value), "a hex PCI id like 0x2330");
    return std::nullopt;
  }
  uint16_t id = 0;
  std::from_chars(value.scalar.data() + 2, value.scalar.data() + value.scalar.size(), id, 16);
  return id;
}

std::optional<std::string> Checker::name(const Value& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  if (value.kind == Value::Kind::scalar && is_name(value.scalar)) return value.scalar;
  report(value.at, path, describe(value), "a name: " + std::string(kNameRule));
  return std::nullopt;
}

std::optional<std::string> Checker::identifier(const Value& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  static const std::regex kLetterFirst("[A-Za-z_][A-Za-z0-9._-]{0,63}");
  if (value.kind == Value::Kind::scalar && std::regex_match(value.scalar, kLetterFirst)) return value.scalar;
  report(value.at, path, describe(value),
         "a name of letters, digits, '.', '_' and '-', at most 64, starting with a letter or '_'");
  return std::nullopt;
}

}  // namespace hostagent::vmtemplates::yaml
