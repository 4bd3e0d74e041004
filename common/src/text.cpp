// common/text: UTF-8 decoding and quoting for messages.
#include "hostagent/common/text.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <utility>

namespace hostagent::text {
namespace {

constexpr std::string_view kHex = "0123456789abcdef";

void append_escaped(std::string& out, std::string_view bytes) {
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += "\\x";
    out += kHex[byte >> 4U];
    out += kHex[byte & 0xfU];
  }
}

// Shown escaped even when well-formed: they move or hide what follows them on a terminal
// (C0, DEL, C1), or reorder it (the bidirectional embeddings, overrides and isolates of UAX #9,
// the "Trojan Source" characters).
bool hides_text(uint32_t c) {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) ||
         c == '"' || c == '\\';
}

// The three control characters a pasted script or key is full of, by their usual names.
const char* escape_name(uint32_t c) {
  if (c == '\n') return "\\n";
  if (c == '\t') return "\\t";
  if (c == '\r') return "\\r";
  return nullptr;
}

}  // namespace

std::size_t decode_utf8(std::string_view text, std::size_t i, uint32_t& code_point) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  }
  // The lead byte's high bits give the length; the rest of it starts the code point.
  std::size_t length = 0;
  if ((lead & 0xe0U) == 0xc0U) length = 2;
  if ((lead & 0xf0U) == 0xe0U) length = 3;
  if ((lead & 0xf8U) == 0xf0U) length = 4;
  if (length == 0 || i + length > text.size()) return 0;
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  code_point = lead & (0x7fU >> length);
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0U) != 0x80U) return 0;
    code_point = (code_point << 6U) | (byte(i + k) & 0x3fU);
  }
  const bool surrogate = code_point >= 0xd800 && code_point <= 0xdfff;
  if (code_point < kSmallest[length] || code_point > 0x10ffff || surrogate) return 0;
  return length;
}

namespace {

// Each character of value as a message shows it; `quotes`: the quote and the backslash escaped
// too, as inside quoted()'s quotes.
void append_shown(std::string& out, std::string_view value, bool quotes) {
  for (std::size_t i = 0; i < value.size();) {
    uint32_t code_point = 0;
    std::size_t length = decode_utf8(value, i, code_point);
    const bool quoting = code_point == '"' || code_point == '\\';
    const bool readable = length != 0 && (!hides_text(code_point) || (quoting && !quotes));
    if (length == 0) length = 1;  // a malformed byte is shown alone; decoding resumes after it
    const auto bytes = value.substr(i, length);
    if (const char* name = escape_name(code_point); length == 1 && name != nullptr) {
      out += name;
    } else if (readable) {
      out += bytes;
    } else {
      append_escaped(out, bytes);
    }
    i += length;
  }
}

}  // namespace

std::string ascii_lower(std::string_view value) {
  std::string out(value);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string quoted(std::string_view value, std::size_t longest) {
  std::string out = "\"";
  append_shown(out, value.substr(0, longest), true);
  return out + (value.size() > longest ? "...\"" : "\"");
}

std::string shown(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  append_shown(out, value, false);
  return out;
}

std::string valid_utf8(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size();) {
    uint32_t code_point = 0;
    const std::size_t length = decode_utf8(value, i, code_point);
    if (length == 0) {
      append_escaped(out, value.substr(i, 1));  // decoding resumes at the next byte
      ++i;
      continue;
    }
    out += value.substr(i, length);
    i += length;
  }
  return out;
}

std::string xml_text_problem(std::string_view value, XmlText kind) {
  for (std::size_t i = 0; i < value.size();) {
    uint32_t code_point = 0;
    const std::size_t length = decode_utf8(value, i, code_point);
    if (length == 0 || code_point == 0xfffe || code_point == 0xffff) return "is not valid UTF-8";
    const bool line_break = code_point == 0x09 || code_point == 0x0a || code_point == 0x0d;
    const bool control = code_point < 0x20 || (kind == XmlText::one_line && code_point == 0x7f);
    if (control && (kind == XmlText::one_line || !line_break)) return "holds a control character";
    i += length;
  }
  return "";
}

std::string binary_size(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024;
  if (bytes >= kKiB * kKiB * kKiB && bytes % (kKiB * kKiB * kKiB) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= kKiB * kKiB && bytes % (kKiB * kKiB) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes % kKiB == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::optional<uint64_t> libvirt_bytes(std::string_view value, std::string_view unit) {
  static constexpr std::pair<std::string_view, int> kShifts[] = {
      {"b", 0},    {"bytes", 0}, {"k", 10}, {"K", 10},   {"KiB", 10}, {"m", 20}, {"M", 20},
      {"MiB", 20}, {"g", 30},    {"G", 30}, {"GiB", 30}, {"t", 40},   {"T", 40}, {"TiB", 40}};
  if (unit.empty()) unit = "KiB";
  const auto* shift =
      std::find_if(std::begin(kShifts), std::end(kShifts), [&](const auto& s) { return s.first == unit; });
  uint64_t number = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (shift == std::end(kShifts) || value.empty() || ec != std::errc() || end != value.data() + value.size() ||
      number > (~uint64_t{0} >> shift->second)) {
    return std::nullopt;
  }
  return number << shift->second;
}

}  // namespace hostagent::text
