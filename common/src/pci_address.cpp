#include "hostagent/common/pci_address.hpp"

#include <charconv>
#include <cstdio>

#include "hostagent/common/text.hpp"

namespace hostagent {

std::string PciAddress::to_string() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, device, function);
  return buf;
}

namespace {

bool parse_hex_field(std::string_view text, size_t min_digits, uint32_t max, uint32_t& out) {
  if (text.size() < min_digits) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return ec == std::errc() && ptr == text.data() + text.size() && out <= max;
}

}  // namespace

Result<PciAddress> PciAddress::parse(std::string_view text) {
  const auto bad = [&] {
    return Error{ErrorCode::invalid_argument, "PCI address " + text::quoted(text) + ": expected the form 0000:1b:00.0"};
  };
  const auto colon1 = text.find(':');
  const auto colon2 = text.find(':', colon1 == std::string_view::npos ? 0 : colon1 + 1);
  const auto dot = text.find('.');
  if (colon1 == std::string_view::npos || colon2 == std::string_view::npos || dot == std::string_view::npos ||
      !(colon1 < colon2 && colon2 < dot)) {
    return bad();
  }
  uint32_t domain = 0, bus = 0, device = 0, function = 0;
  if (!parse_hex_field(text.substr(0, colon1), 4, 0xffffffffu, domain) ||
      !parse_hex_field(text.substr(colon1 + 1, colon2 - colon1 - 1), 2, 0xff, bus) ||
      !parse_hex_field(text.substr(colon2 + 1, dot - colon2 - 1), 2, 0x1f, device) ||
      !parse_hex_field(text.substr(dot + 1), 1, 7, function) || dot + 2 != text.size() || colon2 - colon1 != 3 ||
      dot - colon2 != 3) {
    return bad();
  }
  return PciAddress{domain, static_cast<uint8_t>(bus), static_cast<uint8_t>(device), static_cast<uint8_t>(function)};
}

}  // namespace hostagent
