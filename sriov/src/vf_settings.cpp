// sriov/vf_settings: the small value helpers of the VF settings (MAC text, link state names).
#include <cctype>

#include "hostagent/common/text.hpp"
#include "hostagent/sriov/vf_netlink.hpp"

namespace hostagent::sriov {

const char* to_string(LinkState state) noexcept {
  switch (state) {
    case LinkState::automatic:
      return "auto";
    case LinkState::enable:
      return "enable";
    case LinkState::disable:
      return "disable";
  }
  return "?";
}

Result<std::string> normalize_mac(const std::string& text, const std::string& field) {
  const Error bad =
      field_error(field, text::quoted(text) + " is not a MAC address; write six hex octets, e.g. 52:54:00:12:34:56");
  if (text.size() != 17) return bad;
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (i % 3 == 2) {
      if (c != ':') return bad;
    } else if (std::isxdigit(c) == 0) {
      return bad;
    }
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

}  // namespace hostagent::sriov
