// hostagent/common/names: the name rule, checked.
#include "hostagent/common/names.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <random>

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

std::string random_uuid() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const uint64_t high = (random() & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  const uint64_t low = (random() & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  char text[37];
  std::snprintf(text, sizeof(text), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(high >> 32),
                static_cast<unsigned>((high >> 16) & 0xffff), static_cast<unsigned>(high & 0xffff),
                static_cast<unsigned>(low >> 48), static_cast<unsigned long long>(low & 0xffffffffffffULL));
  return text;
}

bool is_uuid(std::string_view text) {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : std::isxdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

std::string UuidRule::normal(std::string_view text) {
  return text::ascii_lower(text);
}

Error UuidRule::refusal(std::string_view text, const std::string& field) {
  return field_error(field, text::quoted(text) + " is not " + std::string(kUuidRule));
}

bool is_request_id(std::string_view text) {
  if (text.empty() || text.size() > kMaxRequestIdLength) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace hostagent
