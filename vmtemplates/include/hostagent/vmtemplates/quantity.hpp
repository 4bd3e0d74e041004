// vmtemplates/quantity: sizes as infra engineers write them in templates ("1792GiB", "1280GB",
// "1G" for a hugepage size). Binary and decimal units are both accepted and never confused: GB is
// 10^9, GiB is 2^30, because a VM shape copied from a cloud's price list says GB and means it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent::vmtemplates {

// Parses "<integer><unit>" with unit one of B, K/KiB, M/MiB, G/GiB, T/TiB (binary) or KB, MB, GB, TB
// (decimal). A bare single letter (K, M, G, T) is binary, as in the kernel's hugepagesz=1G.
// invalid_argument: "size "X": WHY; write it like 1792GiB, 1280GB or 1G".
Result<uint64_t> parse_byte_size(std::string_view text);

// The same parse for a caller that says where the text was: the bytes, or why it is not a size
// ("the unit is missing"), bare.
struct ByteSize {
  std::optional<uint64_t> bytes;
  std::string why;  // "" when bytes
};
ByteSize read_byte_size(std::string_view text);

}  // namespace hostagent::vmtemplates
