// hostagent/common/hardware_ids: the MAC and GUID rules, checked.
#include "hostagent/common/hardware_ids.hpp"

#include "hostagent/common/text.hpp"

namespace hostagent {
namespace {

bool is_hex(char c, bool upper_too) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (upper_too && c >= 'A' && c <= 'F');
}

// Groups of `width` hex digits, `groups` of them, separated by ':'.
bool is_grouped_hex(std::string_view text, std::size_t groups, std::size_t width, bool upper_too) {
  if (text.size() != groups * (width + 1) - 1) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool separator = i % (width + 1) == width;
    if (separator ? text[i] != ':' : !is_hex(text[i], upper_too)) return false;
  }
  return true;
}

}  // namespace

bool is_mac(std::string_view text) {
  return is_grouped_hex(text, 6, 2, true);
}

bool is_guid(std::string_view text) {
  return is_grouped_hex(text, 4, 4, false);
}

Result<std::string> mac_text(std::string_view text, const std::string& field) {
  if (!is_mac(text)) {
    return field_error(
        field, text::quoted(text) + " is not a MAC address; write six hex pairs separated by ':' (02:00:00:00:00:01)");
  }
  return text::ascii_lower(text);
}

namespace {

bool is_multicast_mac(std::string_view mac) {
  const auto low_digit = static_cast<unsigned char>(mac[1]);
  const int value = low_digit <= '9' ? low_digit - '0' : (low_digit | 0x20) - 'a' + 10;
  return (value & 1) != 0;
}

}  // namespace

bool MacRule::holds(std::string_view text) {
  return is_mac(text) && !is_multicast_mac(text) && text::ascii_lower(text) != "00:00:00:00:00:00";
}

std::string MacRule::normal(std::string_view text) {
  return text::ascii_lower(text);
}

Error MacRule::refusal(std::string_view text, const std::string& field) {
  auto syntax = mac_text(text, field);
  if (!syntax.ok()) return syntax.error();
  if (is_multicast_mac(text)) {
    return field_error(field, text::quoted(text) +
                                  " is a multicast address (the low bit of its first octet is set); a VF needs a "
                                  "unicast one, such as 02:00:00:00:00:01");
  }
  return field_error(field,
                     text::quoted(text) + " is the all-zero address; give a unicast one, such as 02:00:00:00:00:01");
}

}  // namespace hostagent
