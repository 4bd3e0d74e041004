// cloudinit/seed_checks: what a NoCloud seed may contain, checked before anything is written. Every
// message names the field and says what would be accepted.
#pragma once

#include <string>

#include "hostagent/cloudinit/nocloud_seed.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::cloudinit::detail {

// Every field of the seed, and that keys and user data are not both given.
Status check_seed(const NoCloudSeed& seed);

// An absolute path naming a file.
Status check_iso_path(const std::filesystem::path& iso);

// A value quoted for an error message: printable ASCII as is, everything else as \xNN; at most
// 80 characters of it (keys and user data are long).
std::string quoted(const std::string& value);

}  // namespace hostagent::cloudinit::detail
