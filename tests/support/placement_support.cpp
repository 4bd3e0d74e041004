// Test helper: finding the real Placement, or saying why not.
#include "placement_support.hpp"

#include <doctest/doctest.h>

#include "hostagent/common/names.hpp"
#include "test_support.hpp"

namespace hostagent::testing {

std::optional<std::string> placement_url() {
  const std::string url = env_or("HOSTAGENT_PLACEMENT_URL", "");
  std::string why = "HOSTAGENT_PLACEMENT_URL is not set";
  if (!url.empty()) {
    auto client = fleet::PlacementClient::make({url, "admin", ""});
    if (client.ok()) {
      auto roots = (*client)->get("/");
      if (roots.ok()) return url;
      why = roots.error().message;
    } else {
      why = client.error().message;
    }
  }
  const std::string message = "Placement is not reachable (" + why + "); start it with scripts/placement.sh start " +
                              "and export HOSTAGENT_PLACEMENT_URL=$(scripts/placement.sh url)";
  if (env_or("HOSTAGENT_REQUIRE_PLACEMENT", "") == "1") FAIL(message);
  skip(message);
  return std::nullopt;
}

std::unique_ptr<fleet::PlacementClient> placement_client(const std::string& url) {
  auto client = fleet::PlacementClient::make({url, "admin", ""});
  REQUIRE_MESSAGE(client.ok(), client.error().message);
  return std::move(client).value();
}

void remove_tree(fleet::PlacementClient& placement, const std::string& root_uuid) {
  const auto removed = fleet::remove_tree(placement, root_uuid);
  CHECK_MESSAGE(removed.ok(), (removed.ok() ? std::string() : removed.error().message));
}

std::string unique_host_name(const std::string& prefix) {
  return prefix + "-" + random_uuid().substr(0, 8);
}

}  // namespace hostagent::testing
