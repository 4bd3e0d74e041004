// hostagent/common/names: the name rule, checked.
#include "hostagent/common/names.hpp"

#include <algorithm>

#include "hostagent/common/text.hpp"

namespace hostagent {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

}  // namespace

bool is_name(std::string_view text) {
  return name_problem(text).empty();
}

std::string name_problem(std::string_view text) {
  if (text.empty()) return "it is empty";
  if (text.size() > kMaxNameLength) return "it is longer than " + std::to_string(kMaxNameLength) + " characters";
  if (!std::all_of(text.begin(), text.end(), is_name_char)) return "it contains a character that is not allowed";
  if (text.front() == '.') return "it starts with '.'";
  // A name an operator pipes to virsh, ls or rm must never read as an option there.
  if (text.front() == '-') return "it starts with '-'";
  return {};
}

Error name_error(std::string_view text, std::string_view noun, const std::string& field) {
  return field_error(field, text::quoted(text) + " is not a " + std::string(noun) + ": " + std::string(kNameRule));
}

bool is_request_id(std::string_view text) {
  if (text.empty() || text.size() > kMaxRequestIdLength) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace hostagent
