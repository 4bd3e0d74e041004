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

}  // namespace hostagent::cloudinit::detail
