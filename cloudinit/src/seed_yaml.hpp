// cloudinit/seed_yaml: the YAML files of a NoCloud seed, written with yaml-cpp's emitter so that no
// value from a request is ever spliced into YAML text (a key comment with ": " or a quote stays a
// string).
#pragma once

#include <string>
#include <vector>

#include "hostagent/cloudinit/nocloud_seed.hpp"

namespace hostagent::cloudinit::detail {

// "instance-id: ...\nlocal-hostname: ...\n"
std::string render_meta_data(const NoCloudSeed& seed);

// The request's user data: user_data verbatim when given; otherwise a cloud-config document listing
// the keys under ssh_authorized_keys (cloud-init adds them to the default user); "" with neither.
std::string request_user_data(const NoCloudSeed& seed);
// The network-config file (version 2) for seed.nics, or "" when none has an MTU: see NoCloudSeed.
std::string render_network_config(const NoCloudSeed& seed);

// What NoCloud reads when no one gave user data (its datasource needs the file): an empty cloud-config.
std::string empty_user_data();

}  // namespace hostagent::cloudinit::detail
