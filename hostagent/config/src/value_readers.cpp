// hostagent/config/value_readers (private): durations, CPU lists, paths and listen addresses read
// out of located YAML, with messages in the checker's "found X (why), expected Y" form.
#include "value_readers.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "hostagent/common/sysfs_root.hpp"

namespace hostagent::config {
namespace {

using vmtemplates::yaml::describe;

constexpr int64_t kDayMs = 24LL * 60 * 60 * 1000;
constexpr std::size_t kMaxDurationDigits = 9;  // keeps the product with an hour well inside int64_t

struct Unit {
  std::string_view suffix;
  int64_t ms;
};
constexpr Unit kUnits[] = {{"ms", 1}, {"s", 1000}, {"m", 60LL * 1000}, {"h", 60LL * 60 * 1000}};

// The milliseconds text means, or nullopt; `why` says what is wrong when it helps the reader.
std::optional<int64_t> duration_ms(const std::string& text, std::string& why) {
  const auto digits_end = std::find_if_not(text.begin(), text.end(),
                                           [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
  const auto digits = static_cast<std::size_t>(digits_end - text.begin());
  if (digits == 0 || digits > kMaxDurationDigits) return std::nullopt;
  if (digits == text.size()) {
    why = " (no unit)";
    return std::nullopt;
  }
  int64_t number = 0;
  std::from_chars(text.data(), text.data() + digits, number);
  const std::string_view suffix = std::string_view(text).substr(digits);
  for (const Unit& unit : kUnits) {
    if (suffix == unit.suffix) return number * unit.ms;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::milliseconds> read_duration(Checker& check, const Value& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  const std::string expected = "a duration above 0 and under 1 day, like 60s, 500ms or 2m (units ms, s, m, h)";
  std::string why;
  const auto ms = value.kind == Value::Kind::scalar ? duration_ms(value.scalar, why) : std::nullopt;
  if (!ms || *ms <= 0 || *ms >= kDayMs) {
    check.report(value.at, path, describe(value) + why, expected);
    return std::nullopt;
  }
  return std::chrono::milliseconds(*ms);
}

std::optional<std::vector<int>> read_cpu_list(Checker& check, const Value& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  const std::string expected = "a CPU list like 0-3,96-99, or \"\" for none";
  if (value.kind != Value::Kind::scalar) {
    check.report(value.at, path, describe(value), expected);
    return std::nullopt;
  }
  auto read = hostagent::read_cpu_list(value.scalar);
  if (!read.cpus) {
    check.report(value.at, path, describe(value) + " (" + read.why + ")", expected);
    return std::nullopt;
  }
  return std::move(read.cpus);
}

std::optional<std::filesystem::path> read_absolute_path(Checker& check, const Value& value, const std::string& path,
                                                        EmptyPath empty) {
  if (value.is_null()) return std::nullopt;
  const std::string expected =
      empty == EmptyPath::none ? "an absolute path without '..', or \"\" for none" : "an absolute path without '..'";
  if (value.kind != Value::Kind::scalar) {
    check.report(value.at, path, describe(value), expected);
    return std::nullopt;
  }
  if (value.scalar.empty() && empty == EmptyPath::none) return std::filesystem::path();
  if (auto problem = absolute_path_problem(value.scalar)) {
    check.report(value.at, path, describe(value) + " (" + *problem + ")", expected);
    return std::nullopt;
  }
  return std::filesystem::path(value.scalar);
}

std::optional<ListenAddress> read_listen_address(Checker& check, const Value& value, const std::string& path) {
  const std::string expected(kListenForms);
  if (value.kind != Value::Kind::scalar) {
    check.report(value.at, path, describe(value), expected);
    return std::nullopt;
  }
  ListenAddress address;
  if (auto problem = listen_address_problem(value.scalar, address)) {
    check.report(value.at, path, describe(value) + " (" + *problem + ")", expected);
    return std::nullopt;
  }
  return address;
}

}  // namespace hostagent::config
