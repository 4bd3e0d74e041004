// fleet/placement_answers: Placement 1.39's answers read into typed values, apart from the I/O
// that fetched them (placement_client), so that tests and a fuzz target feed them any bytes. Each
// reads one answer whole and strictly (common/json_fields): a field missing, of another type than
// Placement writes, or null where Placement never writes null is a parse_error naming its path.
// Nothing here throws: one odd answer must never take a sync thread, and with it the host, down.
// The shapes are placement 8.0.0's (handlers/resource_provider.py, inventory.py, trait.py,
// allocation.py, allocation_candidate.py) at microversion 1.39.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/fleet/placement_client.hpp"

namespace hostagent::fleet::answers {

// GET /resource_providers/{uuid}: its name and parent ("" for a root, whose parent is null).
struct Provider {
  std::string name;
  std::string parent_uuid;
};
Result<Provider> provider(const boost::json::value& answer);

// GET /resource_providers/{uuid}/inventories.
Result<std::map<std::string, InventoryRecord>> inventories(const boost::json::value& answer);

// GET /resource_providers/{uuid}/traits.
struct Traits {
  int64_t generation = 0;
  std::set<std::string> traits;
};
Result<Traits> traits(const boost::json::value& answer);

// The integer `key` of an answer: POST /resource_providers' "generation", a PUT's
// "resource_provider_generation".
Result<int64_t> generation(const boost::json::value& answer, const char* key);

// GET /resource_providers?...: each provider with its root.
struct Listed {
  std::string uuid;
  std::string root_uuid;
  ListedProvider provider;
};
Result<std::vector<Listed>> listing(const boost::json::value& answer);

// GET /resource_providers/{uuid}/allocations.
Result<ProviderAllocations> provider_allocations(const boost::json::value& answer);

// GET /allocations/{consumer}: {"allocations": {}} alone for a consumer with none.
Result<ConsumerState> consumer(const boost::json::value& answer);

// An "allocations" object: {provider: {"resources": {class: amount}}}, as an allocation request
// and a consumer carry it.
Result<ProviderResources> allocations(const boost::json::value& allocations);

// GET /allocation_candidates: each request with its allocations, its mappings (request group
// suffix -> providers, kept as Placement wrote them) and the root of its first provider, which
// the provider summaries name.
struct Candidate {
  ProviderResources allocations;
  boost::json::value mappings;
  std::string root_uuid;
};
Result<std::vector<Candidate>> allocation_candidates(const boost::json::value& answer);

}  // namespace hostagent::fleet::answers
