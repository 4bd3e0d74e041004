// fleet/placement_client: requests and answers of Placement 1.39 over the project's HTTP client.
#include "hostagent/fleet/placement_client.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <utility>
#include <vector>

#include "hostagent/api/api_client.hpp"
#include "hostagent/fleet/placement_answers.hpp"

namespace hostagent::fleet {
namespace {

namespace json = boost::json;

// "http://h:p/placement" -> {"http://h:p", "/placement"}: the client takes the endpoint, each target
// the prefix.
std::pair<std::string, std::string> split_url(const std::string& url) {
  const auto scheme = url.find("://");
  const auto path = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  if (path == std::string::npos) return {url, ""};
  std::string prefix = url.substr(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return {url.substr(0, path), prefix};
}

// Placement's error body: {"errors": [{"status", "title", "detail", "code"}]} (placement/util.py).
std::pair<std::string, std::string> placement_error(const std::string& body) {
  json::error_code ec;
  const auto value = json::parse(body, ec);
  if (ec || !value.is_object()) return {"", body.substr(0, 300)};
  const auto* errors = value.as_object().if_contains("errors");
  if (errors == nullptr || !errors->is_array() || errors->as_array().empty()) return {"", body.substr(0, 300)};
  const auto& first = errors->as_array().front();
  const auto text = [&](const char* key) {
    const auto* field = first.is_object() ? first.as_object().if_contains(key) : nullptr;
    return field != nullptr && field->is_string() ? std::string(field->as_string()) : std::string();
  };
  std::string detail = text("detail");
  // webob prefixes the status line and a blank line: keep the sentence Placement wrote.
  if (const auto cut = detail.find("\n\n"); cut != std::string::npos) detail = detail.substr(cut + 2);
  // A schema failure quotes the whole JSON schema after its first line: the first line says it.
  if (const auto cut = detail.find("  Failed validating"); cut != std::string::npos) detail.resize(cut);
  while (!detail.empty() && (detail.back() == ' ' || detail.back() == '\n')) detail.pop_back();
  while (!detail.empty() && detail.front() == ' ') detail.erase(0, 1);
  return {text("code"), detail.substr(0, 500)};
}

ErrorCode code_for(unsigned status, const std::string& code) {
  if (status == 409) return code == "placement.concurrent_update" ? ErrorCode::conflict : ErrorCode::does_not_fit;
  if (status == 404) return ErrorCode::not_found;
  if (status >= 500) return ErrorCode::unavailable;
  return ErrorCode::invalid_argument;
}

json::object inventory_json(const InventoryRecord& record) {
  return {{"total", record.total},       {"reserved", record.reserved},   {"min_unit", 1},
          {"max_unit", record.max_unit}, {"step_size", record.step_size}, {"allocation_ratio", 1.0}};
}

// A reader's parse_error as the answer's: which request, and that Placement should not send it.
template <typename T>
Result<T> answered(const std::string& target, Result<T> read) {
  if (read.ok()) return read;
  return Error{ErrorCode::parse_error,
               "Placement's answer to " + target + " is not what Placement 1.39 sends: " + read.error().message};
}

class Client final : public PlacementClient {
 public:
  Client(std::unique_ptr<api::ApiClient> http, std::string url, std::string prefix)
      : http_(std::move(http)), url_(std::move(url)), prefix_(std::move(prefix)) {}

  const std::string& url() const override { return url_; }

  Result<json::value> get(const std::string& target) override {
    HA_TRY(auto response, call("GET", target, nullptr));
    return parse(response, target);
  }

  Status ensure_resource_class(const std::string& name) override {
    HA_TRY(auto ignored, call("PUT", "/resource_classes/" + name, nullptr));
    return ok_status();
  }
  Status ensure_trait(const std::string& name) override {
    HA_TRY(auto ignored, call("PUT", "/traits/" + name, nullptr));
    return ok_status();
  }

  Result<std::optional<ProviderState>> provider(const std::string& uuid) override {
    const std::string target = "/resource_providers/" + uuid;
    auto found = get(target);
    if (!found.ok()) {
      if (found.error().code == ErrorCode::not_found) return std::optional<ProviderState>();
      return found.error();
    }
    HA_TRY(const auto inventories, get(target + "/inventories"));
    HA_TRY(const auto traits, get(target + "/traits"));
    HA_TRY(const auto provider, answered(target, answers::provider(*found)));
    ProviderState state{uuid, provider.name, provider.parent_uuid, 0, {}, {}};
    HA_TRY(state.inventories, answered(target + "/inventories", answers::inventories(inventories)));
    HA_TRY(auto listed, answered(target + "/traits", answers::traits(traits)));
    // Both reads carry the generation; the later one is the one to write against.
    state.generation = listed.generation;
    state.traits = std::move(listed.traits);
    return std::optional<ProviderState>(std::move(state));
  }

  Result<std::string> provider_name(const std::string& uuid) override {
    const std::string target = "/resource_providers/" + uuid;
    HA_TRY(const auto found, get(target));
    HA_TRY(const auto provider, answered(target, answers::provider(found)));
    return provider.name;
  }

  Result<ProviderState> create_provider(const std::string& uuid, const std::string& name,
                                        const std::string& parent_uuid) override {
    json::object body{{"uuid", uuid}, {"name", name}};
    if (!parent_uuid.empty()) body["parent_provider_uuid"] = parent_uuid;
    const json::value value = body;
    HA_TRY(auto response, call("POST", "/resource_providers", &value));
    HA_TRY(const auto created, parse(response, "/resource_providers"));
    HA_TRY(const auto generation, answered("/resource_providers", answers::generation(created, "generation")));
    return ProviderState{uuid, name, parent_uuid, generation, {}, {}};
  }

  Result<int64_t> set_inventories(const std::string& uuid, int64_t generation,
                                  const std::map<std::string, InventoryRecord>& inventories) override {
    json::object map;
    for (const auto& [rc, record] : inventories) map[rc] = inventory_json(record);
    const json::value body = json::object{{"resource_provider_generation", generation}, {"inventories", map}};
    return put_generation("/resource_providers/" + uuid + "/inventories", body);
  }

  Result<int64_t> set_traits(const std::string& uuid, int64_t generation,
                             const std::set<std::string>& traits) override {
    json::array list;
    for (const auto& trait : traits) list.emplace_back(trait);
    const json::value body = json::object{{"resource_provider_generation", generation}, {"traits", list}};
    return put_generation("/resource_providers/" + uuid + "/traits", body);
  }

  Status delete_provider(const std::string& uuid) override {
    HA_TRY(auto ignored, call("DELETE", "/resource_providers/" + uuid, nullptr));
    return ok_status();
  }

  Result<std::map<std::string, std::string>> roots_with(const std::string& trait) override {
    const std::string target = "/resource_providers?required=" + trait;
    HA_TRY(const auto found, get(target));
    HA_TRY(const auto listing, answered(target, answers::listing(found)));
    std::map<std::string, std::string> out;
    for (const auto& listed : listing) {
      if (listed.uuid == listed.root_uuid) out[listed.uuid] = listed.provider.name;
    }
    return out;
  }

  Result<std::map<std::string, ListedProvider>> tree(const std::string& root_uuid) override {
    const std::string target = "/resource_providers?in_tree=" + root_uuid;
    HA_TRY(const auto found, get(target));
    HA_TRY(const auto listing, answered(target, answers::listing(found)));
    std::map<std::string, ListedProvider> out;
    for (const auto& listed : listing) out[listed.uuid] = listed.provider;
    return out;
  }

  Result<ProviderAllocations> provider_allocations(const std::string& uuid) override {
    const std::string target = "/resource_providers/" + uuid + "/allocations";
    HA_TRY(const auto found, get(target));
    return answered(target, answers::provider_allocations(found));
  }

  Result<ConsumerState> consumer(const std::string& consumer) override {
    const std::string target = "/allocations/" + consumer;
    HA_TRY(const auto found, get(target));
    return answered(target, answers::consumer(found));
  }

  // A new consumer's generation is null (handlers/util.py ensure_consumer); the body replaces all.
  Status write_allocations(const ConsumerWrite& write) override {
    json::object allocations;
    for (const auto& [provider, resources] : write.allocations) {
      json::object amounts;
      for (const auto& [rc, amount] : resources) amounts[rc] = amount;
      allocations[provider] = json::object{{"resources", amounts}};
    }
    json::object body{{"allocations", allocations},
                      {"project_id", write.project_id},
                      {"user_id", write.user_id},
                      {"consumer_type", write.consumer_type}};
    body["consumer_generation"] = write.generation ? json::value(*write.generation) : json::value(nullptr);
    const json::value value = body;
    HA_TRY(auto ignored, call("PUT", "/allocations/" + write.consumer, &value));
    return ok_status();
  }

 private:
  Result<int64_t> put_generation(const std::string& target, const json::value& body) {
    HA_TRY(auto response, call("PUT", target, &body));
    HA_TRY(const auto answer, parse(response, target));
    return answered(target, answers::generation(answer, "resource_provider_generation"));
  }

  Result<api::ApiResponse> call(const std::string& method, const std::string& target, const json::value* body) {
    HA_TRY(auto response, http_->request(method, prefix_ + target, body == nullptr ? "" : json::serialize(*body)));
    if (response.status >= 200 && response.status < 300) return response;
    const auto [code, detail] = placement_error(response.body);
    std::string why = detail;
    if (response.status == 401 || response.status == 403) why += " (check placement.token_file)";
    return Error{code_for(response.status, code), "Placement " + method + " " + target + ": HTTP " +
                                                      std::to_string(response.status) +
                                                      (code.empty() ? "" : " " + code) + ": " + why};
  }

  Result<json::value> parse(const api::ApiResponse& response, const std::string& target) const {
    if (response.body.empty()) return json::value(json::object{});
    json::error_code ec;
    auto value = json::parse(response.body, ec);
    if (ec || !value.is_object()) {
      return Error{ErrorCode::parse_error,
                   "Placement " + target + ": the answer is not a JSON object; is " + url_ + " Placement's endpoint?"};
    }
    return value;
  }

  std::unique_ptr<api::ApiClient> http_;
  std::string url_;
  std::string prefix_;
};

}  // namespace

ConsumerWrite rewrite_of(const std::string& consumer, const ConsumerState& state, ProviderResources allocations,
                         std::string consumer_type) {
  ConsumerWrite write{consumer, std::move(allocations), state.generation, std::move(consumer_type)};
  if (!state.project_id.empty()) write.project_id = state.project_id;
  if (!state.user_id.empty()) write.user_id = state.user_id;
  return write;
}

Status remove_tree(PlacementClient& placement, const std::string& root_uuid) {
  HA_TRY(const auto listed, placement.tree(root_uuid));
  std::vector<std::pair<int, std::string>> order;  // (-depth, uuid): leaves first
  for (const auto& [uuid, provider] : listed) {
    HA_TRY(const auto held, placement.provider_allocations(uuid));
    for (const auto& [consumer, resources] : held.consumers) {
      HA_TRY(const auto state, placement.consumer(consumer));
      if (state.allocations.empty()) continue;
      HA_TRY_STATUS(placement.write_allocations(rewrite_of(consumer, state, {}, state.consumer_type)));
    }
    int depth = 0;
    for (auto parent = provider.parent_uuid; !parent.empty() && listed.count(parent) != 0;
         parent = listed.at(parent).parent_uuid) {
      ++depth;
    }
    order.emplace_back(-depth, uuid);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [depth, uuid] : order) HA_TRY_STATUS(placement.delete_provider(uuid));
  return ok_status();
}

Result<std::unique_ptr<PlacementClient>> PlacementClient::make(const PlacementOptions& options) {
  auto [endpoint, prefix] = split_url(options.url);
  api::ClientOptions http;
  http.url = endpoint;
  http.ca_file = options.ca_file;
  http.connect_timeout = options.timeout;
  http.read_timeout = options.timeout;
  http.server_name = "Placement";
  http.headers = {
      {"X-Auth-Token", options.token}, {"OpenStack-API-Version", kMicroversion}, {"Accept", "application/json"}};
  auto client = api::ApiClient::make(std::move(http));
  if (!client.ok()) {
    return Error{ErrorCode::invalid_argument, "placement.url '" + options.url + "': " + client.error().message};
  }
  return std::unique_ptr<PlacementClient>(std::make_unique<Client>(std::move(*client), options.url, prefix));
}

}  // namespace hostagent::fleet
