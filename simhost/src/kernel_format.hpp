// simhost/kernel_format: the text formats the kernel uses for the attributes simhost writes, so
// readers written against a real host parse ours unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hostagent::simhost::detail {

// cpumask format ("%*pb"): hex in 32-bit chunks separated by commas, most significant first, the
// first chunk as wide as the bits it holds (lib/vsprintf.c bitmap_string). 40 bits: "ff,ffffffff".
std::string cpumask(const std::vector<int>& cpus, int nr_cpu_ids);
// cpulist format ("%*pbl"), with a trailing newline as every attribute has: "0-23,48-71\n".
std::string cpulist_attr(const std::vector<int>& cpus);
// "0x%0*x\n": vendor (4 digits), class (6), revision (2).
std::string hex_attr(uint32_t value, int digits);
// current_link_speed and max_link_speed (drivers/pci/pci.h PCIE_SPEED2STR), "Unknown" for 0.
std::string link_speed_attr(int generation);
std::string decimal_attr(int64_t value);

}  // namespace hostagent::simhost::detail
