// sriov/rdma_text: GID and GUID formatting.
#include "rdma_text.hpp"

#include <cstdio>

namespace hostagent::sriov::detail {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<GidBytes> parse_gid(const std::string& text, const std::string& what) {
  const Error bad{ErrorCode::parse_error,
                  "parse " + what + ": '" + text + "' is not a GID (8 groups of 4 hex digits separated by ':')"};
  if (text.size() != 39) return bad;
  GidBytes out{};
  std::size_t byte = 0;
  for (std::size_t i = 0; i < text.size(); i += 5) {
    if (i + 4 < text.size() && text[i + 4] != ':') return bad;
    for (std::size_t k = 0; k < 4; k += 2) {
      const int hi = hex_value(text[i + k]);
      const int lo = hex_value(text[i + k + 1]);
      if (hi < 0 || lo < 0) return bad;
      out[byte++] = static_cast<uint8_t>(hi * 16 + lo);
    }
  }
  return out;
}

std::string format_gid(const GidBytes& gid) {
  std::string out;
  char group[8];
  for (std::size_t i = 0; i < gid.size(); i += 2) {
    std::snprintf(group, sizeof(group), "%02x%02x", gid[i], gid[i + 1]);
    out += (i == 0 ? "" : ":") + std::string(group);
  }
  return out;
}

bool is_zero(const GidBytes& gid) {
  for (const auto b : gid) {
    if (b != 0) return false;
  }
  return true;
}

std::string interface_id(const std::string& gid_text) {
  return gid_text.size() == 39 ? gid_text.substr(20) : "";
}

std::string format_guid(uint64_t guid) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%04x:%04x:%04x:%04x", static_cast<unsigned>((guid >> 48) & 0xffff),
                static_cast<unsigned>((guid >> 32) & 0xffff), static_cast<unsigned>((guid >> 16) & 0xffff),
                static_cast<unsigned>(guid & 0xffff));
  return buf;
}

}  // namespace hostagent::sriov::detail
