// fleet/placement_client: requests and answers of Placement 1.39 over the project's HTTP client.
#include "hostagent/fleet/placement_client.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <utility>
#include <vector>

#include "hostagent/api/api_client.hpp"

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

int64_t int_of(const json::value& value, const char* key) {
  const auto* field = value.is_object() ? value.as_object().if_contains(key) : nullptr;
  return field != nullptr && field->is_int64() ? field->as_int64() : 0;
}

std::string string_of(const json::value& value, const char* key) {
  const auto* field = value.is_object() ? value.as_object().if_contains(key) : nullptr;
  return field != nullptr && field->is_string() ? std::string(field->as_string()) : std::string();
}

Result<Resources> parse_resources(const json::value& value) {
  if (!value.is_object()) return Error{ErrorCode::parse_error, "Placement: resources are not an object"};
  Resources out;
  for (const auto& [rc, amount] : value.as_object()) {
    if (!amount.is_int64())
      return Error{ErrorCode::parse_error, "Placement: amount of " + std::string(rc) + " not whole"};
    out[std::string(rc)] = amount.as_int64();
  }
  return out;
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
    auto found = get("/resource_providers/" + uuid);
    if (!found.ok()) {
      if (found.error().code == ErrorCode::not_found) return std::optional<ProviderState>();
      return found.error();
    }
    ProviderState state;
    state.uuid = uuid;
    state.name = string_of(*found, "name");
    state.parent_uuid = string_of(*found, "parent_provider_uuid");
    HA_TRY(const auto inventories, get("/resource_providers/" + uuid + "/inventories"));
    HA_TRY(const auto traits, get("/resource_providers/" + uuid + "/traits"));
    // Both reads carry the generation; the later one is the one to write against.
    state.generation = int_of(traits, "resource_provider_generation");
    if (const auto* map = inventories.as_object().if_contains("inventories"); map != nullptr && map->is_object()) {
      for (const auto& [rc, record] : map->as_object()) {
        state.inventories[std::string(rc)] = {int_of(record, "total"), int_of(record, "reserved"),
                                              int_of(record, "max_unit"), int_of(record, "step_size")};
      }
    }
    if (const auto* list = traits.as_object().if_contains("traits"); list != nullptr && list->is_array()) {
      for (const auto& trait : list->as_array()) {
        if (trait.is_string()) state.traits.insert(std::string(trait.as_string()));
      }
    }
    return std::optional<ProviderState>(std::move(state));
  }

  Result<std::string> provider_name(const std::string& uuid) override {
    HA_TRY(const auto found, get("/resource_providers/" + uuid));
    return string_of(found, "name");
  }

  Result<ProviderState> create_provider(const std::string& uuid, const std::string& name,
                                        const std::string& parent_uuid) override {
    json::object body{{"uuid", uuid}, {"name", name}};
    if (!parent_uuid.empty()) body["parent_provider_uuid"] = parent_uuid;
    const json::value value = body;
    HA_TRY(auto response, call("POST", "/resource_providers", &value));
    HA_TRY(const auto created, parse(response, "/resource_providers"));
    return ProviderState{uuid, name, parent_uuid, int_of(created, "generation"), {}, {}};
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
    HA_TRY(const auto found, get("/resource_providers?required=" + trait));
    std::map<std::string, std::string> out;
    for (const auto& provider : found.as_object().at("resource_providers").as_array()) {
      if (string_of(provider, "uuid") == string_of(provider, "root_provider_uuid")) {
        out[string_of(provider, "uuid")] = string_of(provider, "name");
      }
    }
    return out;
  }

  Result<std::map<std::string, ListedProvider>> tree(const std::string& root_uuid) override {
    HA_TRY(const auto found, get("/resource_providers?in_tree=" + root_uuid));
    std::map<std::string, ListedProvider> out;
    for (const auto& provider : found.as_object().at("resource_providers").as_array()) {
      out[string_of(provider, "uuid")] = {string_of(provider, "name"), string_of(provider, "parent_provider_uuid"),
                                          int_of(provider, "generation")};
    }
    return out;
  }

  Result<ProviderAllocations> provider_allocations(const std::string& uuid) override {
    HA_TRY(const auto found, get("/resource_providers/" + uuid + "/allocations"));
    ProviderAllocations out;
    out.generation = int_of(found, "resource_provider_generation");
    for (const auto& [consumer, held] : found.as_object().at("allocations").as_object()) {
      HA_TRY(out.consumers[std::string(consumer)], parse_resources(held.as_object().at("resources")));
    }
    return out;
  }

  Result<ConsumerState> consumer(const std::string& consumer) override {
    HA_TRY(const auto found, get("/allocations/" + consumer));
    ConsumerState state;
    HA_TRY(state.allocations, parse_allocations(found.as_object().at("allocations")));
    if (const auto* generation = found.as_object().if_contains("consumer_generation");
        generation != nullptr && generation->is_int64()) {
      state.generation = generation->as_int64();
    }
    state.consumer_type = string_of(found, "consumer_type");
    state.project_id = string_of(found, "project_id");
    state.user_id = string_of(found, "user_id");
    return state;
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
    return int_of(answer, "resource_provider_generation");
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

Result<ProviderResources> parse_allocations(const json::value& allocations) {
  if (!allocations.is_object()) return Error{ErrorCode::parse_error, "Placement: allocations are not an object"};
  ProviderResources out;
  for (const auto& [provider, held] : allocations.as_object()) {
    const auto* resources = held.is_object() ? held.as_object().if_contains("resources") : nullptr;
    if (resources == nullptr) return Error{ErrorCode::parse_error, "Placement: allocation without resources"};
    HA_TRY(out[std::string(provider)], parse_resources(*resources));
  }
  return out;
}

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
