#include "simulated_hosts.hpp"

#include <doctest/doctest.h>

#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"

namespace hostagent::testing {

numa::HostModel discover_simulated(const std::string& name, const TempDir& dir) {
  const auto spec = simhost::builtin_host(name);
  REQUIRE_MESSAGE(spec.ok(), spec.error().message);
  const auto written = simhost::write_sysfs_tree(*spec, dir.path());
  REQUIRE_MESSAGE(written.ok(), written.error().message);
  auto model = discovery::discover_from_sysfs(dir.path());
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  model->source = "simulated:" + name;
  return std::move(model).value();
}

}  // namespace hostagent::testing
