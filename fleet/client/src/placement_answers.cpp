// fleet/placement_answers: each of Placement's answers read strictly, one function a shape.
#include "hostagent/fleet/placement_answers.hpp"

#include "hostagent/common/json_fields.hpp"

namespace hostagent::fleet::answers {
namespace {

namespace json = boost::json;
using json_fields::JsonFields;

Result<Resources> resources_of(const JsonFields& resources) {
  HA_TRY(const auto amounts, resources.integers());
  return Resources(amounts.begin(), amounts.end());
}

Result<ProviderResources> allocations_of(const JsonFields& allocations) {
  HA_TRY(const auto providers, allocations.objects());
  ProviderResources out;
  for (const auto& [provider, held] : providers) {
    HA_TRY(const auto resources, held.object("resources"));
    HA_TRY(out[provider], resources_of(resources));
  }
  return out;
}

}  // namespace

Result<Provider> provider(const json::value& answer) {
  HA_TRY(const auto fields, JsonFields::of(answer, ""));
  Provider out;
  HA_TRY(out.name, fields.string("name"));
  HA_TRY(out.parent_uuid, fields.optional_string("parent_provider_uuid"));
  return out;
}

Result<std::map<std::string, InventoryRecord>> inventories(const json::value& answer) {
  HA_TRY(const auto fields, JsonFields::of(answer, ""));
  HA_TRY(const auto map, fields.object("inventories"));
  HA_TRY(const auto records, map.objects());
  std::map<std::string, InventoryRecord> out;
  for (const auto& [rc, record] : records) {
    InventoryRecord& into = out[rc];
    HA_TRY(into.total, record.integer("total"));
    HA_TRY(into.reserved, record.integer("reserved"));
    HA_TRY(into.max_unit, record.integer("max_unit"));
    HA_TRY(into.step_size, record.integer("step_size"));
  }
  return out;
}

Result<Traits> traits(const json::value& answer) {
  HA_TRY(const auto fields, JsonFields::of(answer, ""));
  Traits out;
  HA_TRY(out.generation, fields.integer("resource_provider_generation"));
  HA_TRY(const auto names, fields.strings("traits"));
  out.traits.insert(names.begin(), names.end());
  return out;
}

Result<int64_t> generation(const json::value& answer, const char* key) {
  HA_TRY(const auto fields, JsonFields::of(answer, ""));
  return fields.integer(key);
}

Result<std::vector<Listed>> listing(const json::value& answer) {
  HA_TRY(const auto fields, JsonFields::of(answer, ""));
  HA_TRY(const auto* providers, fields.array("resource_providers"));
  std::vector<Listed> out;
  out.reserve(providers->size());
  for (std::size_t i = 0; i < providers->size(); ++i) {
    HA_TRY(const auto provider, fields.element("resource_providers", i));
    Listed listed;
    HA_TRY(listed.uuid, provider.string("uuid"));
    HA_TRY(listed.root_uuid, provider.string("root_provider_uuid"));
    HA_TRY(listed.provider.name, provider.string("name"));
    HA_TRY(listed.provider.parent_uuid, provider.optional_string("parent_provider_uuid"));
    HA_TRY(listed.provider.generation, provider.integer("generation"));
    out.push_back(std::move(listed));
  }
  return out;
}

Result<ProviderAllocations> provider_allocations(const json::value& answer) {
  HA_TRY(const auto fields, JsonFields::of(answer, ""));
  ProviderAllocations out;
  HA_TRY(out.generation, fields.integer("resource_provider_generation"));
  HA_TRY(const auto allocations, fields.object("allocations"));
  HA_TRY(const auto consumers, allocations.objects());
  for (const auto& [consumer, held] : consumers) {
    HA_TRY(const auto resources, held.object("resources"));
    HA_TRY(out.consumers[consumer], resources_of(resources));
  }
  return out;
}

Result<ConsumerState> consumer(const json::value& answer) {
  HA_TRY(const auto fields, JsonFields::of(answer, ""));
  ConsumerState state;
  HA_TRY(const auto allocations, fields.object("allocations"));
  HA_TRY(state.allocations, allocations_of(allocations));
  if (fields.has("consumer_generation")) {
    HA_TRY(state.generation, fields.integer("consumer_generation"));
  }
  HA_TRY(state.consumer_type, fields.optional_string("consumer_type"));
  HA_TRY(state.project_id, fields.optional_string("project_id"));
  HA_TRY(state.user_id, fields.optional_string("user_id"));
  return state;
}

Result<ProviderResources> allocations(const json::value& allocations) {
  HA_TRY(const auto fields, JsonFields::of(allocations, "allocations"));
  return allocations_of(fields);
}

Result<std::vector<Candidate>> allocation_candidates(const json::value& answer) {
  HA_TRY(const auto fields, JsonFields::of(answer, ""));
  HA_TRY(const auto summaries, fields.object("provider_summaries"));
  HA_TRY(const auto* requests, fields.array("allocation_requests"));
  std::vector<Candidate> out;
  out.reserve(requests->size());
  for (std::size_t i = 0; i < requests->size(); ++i) {
    HA_TRY(const auto request, fields.element("allocation_requests", i));
    Candidate candidate;
    HA_TRY(const auto allocations, request.object("allocations"));
    HA_TRY(candidate.allocations, allocations_of(allocations));
    if (candidate.allocations.empty()) {
      return json_fields::parse_failure("field '" + request.path("allocations") + "' names no provider");
    }
    if (request.has("mappings")) {
      HA_TRY(const auto* mappings, request.raw_object("mappings"));
      candidate.mappings = *mappings;
    }
    const auto& first = candidate.allocations.begin()->first;
    if (!summaries.has(first)) {
      return json_fields::parse_failure("field 'provider_summaries' has no summary of provider " + first);
    }
    HA_TRY(const auto summary, summaries.object(first));
    HA_TRY(candidate.root_uuid, summary.string("root_provider_uuid"));
    out.push_back(std::move(candidate));
  }
  return out;
}

}  // namespace hostagent::fleet::answers
