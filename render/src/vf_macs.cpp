// render/vf_macs: VF MAC addresses, given by the request or derived from the host and the VM.
#include "vf_macs.hpp"

#include <cstdint>
#include <cstdio>

#include "hostagent/common/text.hpp"
#include "input_checks.hpp"

namespace hostagent::render::detail {

MacAddress derived_mac(const std::string& host_id, const std::string& vm_id, std::size_t index) {
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
  // Unicast and never all zeros (the U/L bit is set): a MacAddress by construction.
  auto mac = MacAddress::parse(buf, "derived MAC");
  HA_ASSERT(mac.ok());
  return std::move(mac).value();
}

Result<std::vector<MacAddress>> vf_macs(const GuestOptions& options, const vmtemplates::VmTemplate& shape,
                                        std::size_t count) {
  std::vector<MacAddress> macs;
  if (options.vf_macs.empty()) {
    if (count > 0 && shape.nics.vf.mac == vmtemplates::MacPolicy::request) {
      return invalid_input("template " + text::quoted(shape.name) +
                           " takes VF MAC addresses from the request, and it gave " + "none for " +
                           std::to_string(count) + " VFs");
    }
    if (count > 256) return invalid_input("cannot derive MAC addresses for more than 256 VFs in one VM");
    const std::string& vm_id = options.uuid ? options.uuid->str() : options.name;
    for (std::size_t i = 0; i < count; ++i) macs.push_back(derived_mac(options.host_id, vm_id, i));
    return macs;
  }
  // Each given MAC is a MacAddress (unicast, lower case), and the service refused a request whose
  // MACs repeat or do not match the template's VFs before anything was placed: a mismatch here is
  // a caller that skipped it.
  if (options.vf_macs.size() != count) {
    return invalid_input("the request gives " + std::to_string(options.vf_macs.size()) + " VF MAC addresses for " +
                         std::to_string(count) + " VFs");
  }
  macs.assign(options.vf_macs.begin(), options.vf_macs.end());
  return macs;
}

}  // namespace hostagent::render::detail
