// verify/text_fields: the two readers of text that the probe's console lines (guest_view) and /proc's
// files (qemu_process) share. Internal to verify.
#pragma once

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace hostagent::verify::detail {

// The non-empty pieces of text between separators.
inline std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto end = std::min(text.find(separator, at), text.size());
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// The whole of `text` as a number in `base` (16 takes a "0x" prefix too); nullopt otherwise.
template <typename Int>
std::optional<Int> number(std::string_view text, int base = 10) {
  if (base == 16 && text.starts_with("0x")) text.remove_prefix(2);
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace hostagent::verify::detail
