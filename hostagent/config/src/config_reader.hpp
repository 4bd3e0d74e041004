// hostagent/config/config_reader (private): the located YAML tree to a DaemonConfig, every problem
// (per key and across keys) reported into one list.
#pragma once

#include <vector>

#include "hostagent/config/daemon_config.hpp"
#include "hostagent/vmtemplates/yaml_tree.hpp"

namespace hostagent::config::detail {

DaemonConfig read_config(const vmtemplates::yaml::Value& root, std::vector<vmtemplates::yaml::Problem>& problems);

}  // namespace hostagent::config::detail
