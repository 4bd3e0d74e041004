// render/text_format: CPU lists, cpumaps, hex fields and link speeds for the rendered files.
#include "text_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "hostagent/common/sysfs_root.hpp"

namespace hostagent::render::detail {

std::string id_list(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return format_cpu_list(ids);
}

std::string cpumap(const std::vector<int>& cpus, int nbits) {
  const int words = std::max(1, (nbits + 31) / 32);
  std::vector<uint32_t> mask(static_cast<std::size_t>(words), 0);
  for (const int cpu : cpus) {
    if (cpu >= 0 && cpu < words * 32) mask[static_cast<std::size_t>(cpu / 32)] |= 1U << (cpu % 32);
  }
  // bitmap_print_to_pagebuf: the most significant group is printed only as wide as nbits needs.
  const int lead_bits = nbits - 32 * (words - 1);
  std::string out;
  for (int w = words - 1; w >= 0; --w) {
    const int digits = w == words - 1 ? std::clamp((lead_bits + 3) / 4, 1, 8) : 8;
    char buf[16];
    std::snprintf(buf, sizeof buf, "%0*x", digits, mask[static_cast<std::size_t>(w)]);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

std::string hex(uint64_t value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(value));
  return buf;
}

std::optional<std::string> nccl_link_speed(double gts) {
  // NCCL (src/graph/topo.cc, kvDictPciGen) matches these strings exactly; anything else falls back to
  // Gen3. The short forms are the ones every NCCL release knows; Gen6 only exists in the long form.
  struct Known {
    double gts;
    const char* text;
  };
  static constexpr Known kKnown[] = {
      {2.5, "2.5 GT/s"}, {5.0, "5 GT/s"},   {8.0, "8 GT/s"},
      {16.0, "16 GT/s"}, {32.0, "32 GT/s"}, {64.0, "64.0 GT/s PCIe"},
  };
  for (const auto& known : kKnown) {
    if (std::fabs(known.gts - gts) < 0.01) return std::string(known.text);
  }
  return std::nullopt;
}

}  // namespace hostagent::render::detail
