#include "hostagent/vmtemplates/quantity.hpp"

#include <array>
#include <charconv>
#include <string>
#include <utility>

#include "hostagent/common/text.hpp"

namespace hostagent::vmtemplates {
namespace {

constexpr uint64_t kKi = 1024;
constexpr std::array<std::pair<std::string_view, uint64_t>, 13> kUnits{{
    {"B", 1},
    {"K", kKi},
    {"KiB", kKi},
    {"KB", 1000},
    {"M", kKi* kKi},
    {"MiB", kKi* kKi},
    {"MB", 1000 * 1000},
    {"G", kKi* kKi* kKi},
    {"GiB", kKi* kKi* kKi},
    {"GB", 1000ULL * 1000 * 1000},
    {"T", kKi* kKi* kKi* kKi},
    {"TiB", kKi* kKi* kKi* kKi},
    {"TB", 1000ULL * 1000 * 1000 * 1000},
}};

ByteSize refused(std::string why) {
  return ByteSize{std::nullopt, std::move(why)};
}

}  // namespace

ByteSize read_byte_size(std::string_view text) {
  uint64_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec == std::errc::result_out_of_range) return refused("the number is too large");
  if (ec != std::errc() || end == text.data()) return refused("it does not start with a number");
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  for (const auto& [name, multiplier] : kUnits) {
    if (unit != name) continue;
    if (number > UINT64_MAX / multiplier) return refused("the size overflows 64 bits");
    return ByteSize{number * multiplier, ""};
  }
  return refused(unit.empty() ? "the unit is missing" : "unknown unit " + text::quoted(unit));
}

Result<uint64_t> parse_byte_size(std::string_view text) {
  auto size = read_byte_size(text);
  if (size.bytes) return *size.bytes;
  return Error{ErrorCode::invalid_argument,
               "size " + text::quoted(text) + ": " + size.why + "; write it like 1792GiB, 1280GB or 1G"};
}

}  // namespace hostagent::vmtemplates
