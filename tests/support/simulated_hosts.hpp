// Test helper: a built-in simulated host written under a scratch directory and discovered from it,
// the way the daemon would read a real host.
#pragma once

#include <string>

#include "hostagent/numa/host_model.hpp"
#include "test_support.hpp"

namespace hostagent::testing {

// Writes simhost's NAME under dir and discovers it; the model's source reads "simulated:NAME" so
// outputs do not depend on the scratch path. Fails the calling test case when either step fails.
numa::HostModel discover_simulated(const std::string& name, const TempDir& dir);

}  // namespace hostagent::testing
