// verify/xz: an xz stream decompressed in memory (liblzma). Debian's kernels from 6.12 on ship their
// modules as .ko.xz (6.1's are not compressed), and busybox's insmod, which the probe guests load
// them with, takes only an uncompressed module.
#pragma once

#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent::verify {

// `what` names the data in the error (a file's path). A stream that is not xz, is cut short or is
// corrupt is a parse_error.
Result<std::string> decompress_xz(std::string_view data, const std::string& what);

}  // namespace hostagent::verify
