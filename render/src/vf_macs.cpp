// render/vf_macs: VF MAC addresses, given by the request or derived from the host and the VM.
#include "vf_macs.hpp"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <set>

#include "hostagent/common/text.hpp"
#include "input_checks.hpp"

namespace hostagent::render::detail {
namespace {

// "aa:bb:cc:dd:ee:ff" in either case, lower-cased; nullopt-like empty string when malformed.
std::string normalised_mac(const std::string& text) {
  if (text.size() != 17) return {};
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i % 3 == 2) {
      if (c != ':') return {};
    } else if (std::isxdigit(static_cast<unsigned char>(c)) == 0) {
      return {};
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Result<std::string> checked_mac(const std::string& text, std::size_t index) {
  const std::string mac = normalised_mac(text);
  const std::string where = "vf_macs[" + std::to_string(index) + "] " + text::quoted(text);
  if (mac.empty()) return invalid_input(where + " is not a MAC address of the form 02:00:00:00:00:01");
  const auto first = static_cast<unsigned>(std::stoul(mac.substr(0, 2), nullptr, 16));
  if ((first & 1U) != 0) return invalid_input(where + " is a multicast address; a VF needs a unicast one");
  if (mac == "00:00:00:00:00:00") return invalid_input(where + " is the all-zero address");
  return mac;
}

}  // namespace

std::string derived_mac(const std::string& host_id, const std::string& vm_id, std::size_t index) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64-bit offset basis
  const auto mix = [&hash](const std::string& text) {
    for (const char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ULL;
    }
  };
  mix(host_id);
  mix("/");  // so ("ab", "c") and ("a", "bc") differ
  mix(vm_id);
  // First octet: six hash bits, then U/L = 1 and I/G = 0 (the two low bits, IEEE 802-2014 8.2.2).
  const auto first = static_cast<unsigned>(((hash >> 58) << 2) | 0x02);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", first, static_cast<unsigned>((hash >> 50) & 0xff),
                static_cast<unsigned>((hash >> 42) & 0xff), static_cast<unsigned>((hash >> 34) & 0xff),
                static_cast<unsigned>((hash >> 26) & 0xff), static_cast<unsigned>(index & 0xff));
  return buf;
}

Result<std::vector<std::string>> vf_macs(const GuestOptions& options, const vmtemplates::VmTemplate& shape,
                                         std::size_t count) {
  std::vector<std::string> macs;
  if (options.vf_macs.empty()) {
    if (count > 0 && shape.nics.vf.mac == vmtemplates::MacPolicy::request) {
      return invalid_input("template " + text::quoted(shape.name) +
                           " takes VF MAC addresses from the request, and it gave " + "none for " +
                           std::to_string(count) + " VFs");
    }
    if (count > 256) return invalid_input("cannot derive MAC addresses for more than 256 VFs in one VM");
    const std::string& vm_id = options.uuid.empty() ? options.name : options.uuid;
    for (std::size_t i = 0; i < count; ++i) macs.push_back(derived_mac(options.host_id, vm_id, i));
    return macs;
  }
  if (options.vf_macs.size() != count) {
    return invalid_input("the request gives " + std::to_string(options.vf_macs.size()) + " VF MAC addresses for " +
                         std::to_string(count) + " VFs");
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < count; ++i) {
    HA_TRY(auto mac, checked_mac(options.vf_macs[i], i));
    if (!seen.insert(mac).second) return invalid_input("vf_macs[" + std::to_string(i) + "] " + mac + " is given twice");
    macs.push_back(std::move(mac));
  }
  return macs;
}

}  // namespace hostagent::render::detail
