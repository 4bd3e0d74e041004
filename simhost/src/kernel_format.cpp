// simhost/kernel_format: kernel attribute formats (see kernel_format.hpp).
#include "kernel_format.hpp"

#include <cstdio>

#include "hostagent/common/sysfs_root.hpp"

namespace hostagent::simhost::detail {

std::string cpumask(const std::vector<int>& cpus, int nr_cpu_ids) {
  const int nbits = nr_cpu_ids > 0 ? nr_cpu_ids : 1;
  const int chunks = (nbits + 31) / 32;
  std::vector<uint32_t> words(static_cast<std::size_t>(chunks), 0);
  for (const int cpu : cpus) {
    if (cpu >= 0 && cpu < nbits) words[static_cast<std::size_t>(cpu / 32)] |= 1u << (cpu % 32);
  }
  std::string out;
  int first_bits = nbits % 32 == 0 ? 32 : nbits % 32;
  for (int chunk = chunks - 1; chunk >= 0; --chunk) {
    char buf[16];
    const int width = (first_bits + 3) / 4;
    std::snprintf(buf, sizeof(buf), "%0*x", width, words[static_cast<std::size_t>(chunk)]);
    if (!out.empty()) out += ',';
    out += buf;
    first_bits = 32;
  }
  return out + "\n";
}

std::string cpulist_attr(const std::vector<int>& cpus) {
  return format_cpu_list(cpus) + "\n";
}

std::string hex_attr(uint32_t value, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%0*x\n", digits, value);
  return buf;
}

std::string link_speed_attr(int generation) {
  switch (generation) {
    case 1:
      return "2.5 GT/s PCIe\n";
    case 2:
      return "5.0 GT/s PCIe\n";
    case 3:
      return "8.0 GT/s PCIe\n";
    case 4:
      return "16.0 GT/s PCIe\n";
    case 5:
      return "32.0 GT/s PCIe\n";
    case 6:
      return "64.0 GT/s PCIe\n";
    default:
      return "Unknown\n";
  }
}

std::string decimal_attr(int64_t value) {
  return std::to_string(value) + "\n";
}

}  // namespace hostagent::simhost::detail
