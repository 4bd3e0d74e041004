// render/text_format: the small textual forms the rendered files use (CPU lists, Linux cpumaps, hex
// fields, PCIe link speeds as NCCL spells them). Pure functions, no XML.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hostagent::render::detail {

// "0-23,48-71": libvirt's cpuset/nodeset syntax, from ids in any order (duplicates ignored).
std::string id_list(std::vector<int> ids);

// The Linux cpumap form ("0000,00ffffff") of a set of CPU ids in a system of `nbits` CPUs: 32-bit
// groups of 8 hex digits, most significant first, the leading group only as wide as `nbits` needs.
// NCCL's topology files (and the kernel's local_cpus) use it for <cpu affinity=...>.
std::string cpumap(const std::vector<int>& cpus, int nbits);

// "0x" followed by `digits` lower-case hex digits.
std::string hex(uint64_t value, int digits);

// A PCIe link rate as NCCL's kvDictPciGen table knows it ("16 GT/s"); nullopt for a rate it does not.
std::optional<std::string> nccl_link_speed(double gts);

}  // namespace hostagent::render::detail
