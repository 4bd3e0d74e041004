// Test helper: the real OpenStack Placement that scripts/placement.sh started (Debian's
// placement-api on loopback), found through HOSTAGENT_PLACEMENT_URL. Absent: the suite skips,
// saying so, or fails where HOSTAGENT_REQUIRE_PLACEMENT=1 (scripts/test.sh sets it).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "hostagent/fleet/placement_client.hpp"

namespace hostagent::testing {

// Placement's URL when it answers, after checking; nullopt (skipped) otherwise.
std::optional<std::string> placement_url();
// A client of it with the noauth2 administrator's token; fails the test case when it cannot be made.
std::unique_ptr<fleet::PlacementClient> placement_client(const std::string& url);
// Removes a host's tree from Placement: every allocation on it, then its providers, leaves first.
// A test case's last step, so that a later one (the fleet test's control planes) never sees a host
// that no longer answers.
void remove_tree(fleet::PlacementClient& placement, const std::string& root_uuid);
// A host name no other test case (or earlier run against the same database) has used.
std::string unique_host_name(const std::string& prefix);

}  // namespace hostagent::testing
