// fleet/placement_client: OpenStack Placement's REST API at microversion 1.39, typed. The one place
// that knows its URLs, bodies and error codes (placement 8.0.0: handlers/, schemas/, errors.py);
// hostagentd's sync and hostagentctl's fleet commands both talk through it. Synchronous, one
// keep-alive connection: not thread-safe, one per thread.
#pragma once

#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "hostagent/common/result.hpp"
#include "hostagent/fleet/provider_tree.hpp"

namespace hostagent::fleet {

// The microversion every request names: Placement 8.0's highest (same_subtree needs 1.36, `in:`
// traits 1.39). Without the header Placement answers as 1.0.
inline constexpr const char* kMicroversion = "placement 1.39";

struct PlacementOptions {
  std::string url;    // http://HOST:PORT or https://HOST:PORT, Placement's endpoint (a path prefix allowed)
  std::string token;  // X-Auth-Token: a Keystone token, or "admin" for noauth2
  std::string ca_file;
  std::chrono::milliseconds timeout{10000};
};

struct ProviderState {
  std::string uuid;
  std::string name;
  std::string parent_uuid;
  int64_t generation = 0;
  std::map<std::string, InventoryRecord> inventories;
  std::set<std::string> traits;
};

// A provider as a listing gives it: enough to tell whether anything changed it since (every write
// to its inventories, traits or allocations moves its generation on).
struct ListedProvider {
  std::string name;
  std::string parent_uuid;
  int64_t generation = 0;
};

struct ProviderAllocations {
  int64_t generation = 0;
  std::map<std::string, Resources> consumers;  // consumer -> what it holds on the provider
};

struct ConsumerState {
  ProviderResources allocations;
  std::optional<int64_t> generation;  // nullopt: no such consumer (no allocations)
  std::string consumer_type;
  std::string project_id;
  std::string user_id;
};

struct ConsumerWrite {
  std::string consumer;
  ProviderResources allocations;      // empty: remove them all
  std::optional<int64_t> generation;  // the consumer's, nullopt for a new one
  std::string consumer_type = kVmConsumer;
  std::string project_id = "hostagent";
  std::string user_id = "hostagent";
};

// A consumer's allocations replaced (empty: removed) at the generation just read, its project and
// user kept (the defaults where it has none), as `consumer_type`.
ConsumerWrite rewrite_of(const std::string& consumer, const ConsumerState& state, ProviderResources allocations,
                         std::string consumer_type);

// Errors, by what Placement answered: 409 placement.concurrent_update (a generation moved on) is
// `conflict`; 409 with another code (no room: "would exceed the capacity") is `does_not_fit`; 404
// `not_found`; 400 `invalid_argument`; 401/403 `invalid_argument` naming the token; 5xx and an
// unreachable server `unavailable`. The message carries Placement's detail.
class PlacementClient {
 public:
  static Result<std::unique_ptr<PlacementClient>> make(const PlacementOptions& options);
  virtual ~PlacementClient() = default;

  virtual const std::string& url() const = 0;
  // A 2xx JSON answer of GET `target` (relative to the endpoint, "/resource_providers?...").
  virtual Result<boost::json::value> get(const std::string& target) = 0;

  // PUT /resource_classes/NAME, PUT /traits/NAME: created or already there.
  virtual Status ensure_resource_class(const std::string& name) = 0;
  virtual Status ensure_trait(const std::string& name) = 0;

  // The provider with its inventories and traits; nullopt when Placement has none with that UUID.
  virtual Result<std::optional<ProviderState>> provider(const std::string& uuid) = 0;
  // Its name alone, in one request (a root's is its host's); not_found when Placement has none.
  virtual Result<std::string> provider_name(const std::string& uuid) = 0;
  virtual Result<ProviderState> create_provider(const std::string& uuid, const std::string& name,
                                                const std::string& parent_uuid) = 0;
  // Each a whole replacement at `generation`; the provider's new generation.
  virtual Result<int64_t> set_inventories(const std::string& uuid, int64_t generation,
                                          const std::map<std::string, InventoryRecord>& inventories) = 0;
  virtual Result<int64_t> set_traits(const std::string& uuid, int64_t generation,
                                     const std::set<std::string>& traits) = 0;
  // Leaves first: a provider with children or allocations is refused (conflict).
  virtual Status delete_provider(const std::string& uuid) = 0;
  // Every root provider with `trait` (the hosts of a fleet): uuid -> name.
  virtual Result<std::map<std::string, std::string>> roots_with(const std::string& trait) = 0;
  // Every provider in the tree rooted at `root_uuid`, by UUID: one request.
  virtual Result<std::map<std::string, ListedProvider>> tree(const std::string& root_uuid) = 0;

  // What each consumer holds on the provider, at the provider's generation.
  virtual Result<ProviderAllocations> provider_allocations(const std::string& uuid) = 0;
  virtual Result<ConsumerState> consumer(const std::string& consumer) = 0;
  // PUT /allocations/{consumer}: replaces all of the consumer's allocations.
  virtual Status write_allocations(const ConsumerWrite& write) = 0;
};

// Takes a host out of Placement (a host decommissioned, a test's or benchmark's host): every
// allocation on its tree removed, then its providers, leaves first. The first error stops it.
Status remove_tree(PlacementClient& placement, const std::string& root_uuid);

}  // namespace hostagent::fleet
