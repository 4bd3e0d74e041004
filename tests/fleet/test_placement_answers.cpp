// fleet/placement_answers: each of Placement's answers, as placement 8.0 writes it at 1.39, read into
// its values; and the same answer with any one member taken away or given another type read as a
// parse_error naming that member, or, where Placement may leave it out, read without it. Never an
// exception: an answer is a stranger's bytes (issue 43, defect 2).
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <functional>

#include "hostagent/fleet/placement_answers.hpp"
#include "test_support.hpp"

namespace hostagent::fleet {
namespace {

namespace json = boost::json;
using testing::contains;

// Answers as placement 8.0.0 wrote them to this project's fleet suites (trimmed to one or two
// members of each collection).
const char* const kProvider =
    R"({"uuid": "a1", "name": "h1-numa0", "generation": 3, "parent_provider_uuid": "r1",
        "root_provider_uuid": "r1", "links": [{"rel": "self", "href": "/resource_providers/a1"}]})";
const char* const kRoot =
    R"({"uuid": "r1", "name": "h1", "generation": 1, "parent_provider_uuid": null, "root_provider_uuid": "r1"})";
const char* const kInventories =
    R"({"resource_provider_generation": 3, "inventories": {"VCPU": {"total": 96, "reserved": 4, "min_unit": 1,
        "max_unit": 96, "step_size": 1, "allocation_ratio": 1.0}}})";
const char* const kTraits = R"({"resource_provider_generation": 3, "traits": ["CUSTOM_HOSTAGENT", "HW_NUMA_ROOT"]})";
const char* const kListing = R"({"resource_providers": [
    {"uuid": "r1", "name": "h1", "generation": 1, "parent_provider_uuid": null, "root_provider_uuid": "r1"},
    {"uuid": "a1", "name": "h1-numa0", "generation": 3, "parent_provider_uuid": "r1", "root_provider_uuid": "r1"}]})";
const char* const kProviderAllocations = R"({"resource_provider_generation": 7,
    "allocations": {"c1": {"resources": {"VCPU": 8, "MEMORY_MB": 65536}}}})";
const char* const kConsumer = R"({"allocations": {"a1": {"resources": {"VCPU": 8}, "generation": 7}},
    "consumer_generation": 2, "project_id": "p", "user_id": "u", "consumer_type": "HOSTAGENT_VM"})";
const char* const kCandidates = R"({"allocation_requests": [
    {"allocations": {"g1": {"resources": {"PGPU": 1}}, "a1": {"resources": {"VCPU": 8}}},
     "mappings": {"_GPU0": ["g1"], "_CELL0": ["a1"]}}],
    "provider_summaries": {"g1": {"resources": {"PGPU": {"capacity": 1, "used": 0}}, "traits": [],
                                  "parent_provider_uuid": "a1", "root_provider_uuid": "r1"},
                           "a1": {"resources": {}, "traits": [], "parent_provider_uuid": "r1",
                                  "root_provider_uuid": "r1"}}})";

// Every path to a member of `value` ("resource_providers[1].name"), with a function that edits
// that member in a copy of the document.
using Edit = std::function<void(json::value&)>;
void each_member(
    const json::value& value, const std::string& path,
    const std::function<void(const std::string&, const std::function<void(json::value&, const Edit&)>&)>& visit,
    const std::function<json::value&(json::value&)>& reach) {
  if (value.is_object()) {
    for (const auto& member : value.get_object()) {
      const std::string key(member.key());
      const std::string at = path.empty() ? key : path + "." + key;
      const auto inner = [reach, key](json::value& doc) -> json::value& { return reach(doc).get_object()[key]; };
      visit(at, [reach, key](json::value& doc, const Edit& edit) { edit(reach(doc).get_object()[key]); });
      each_member(member.value(), at, visit, inner);
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.get_array().size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      const auto inner = [reach, i](json::value& doc) -> json::value& { return reach(doc).get_array()[i]; };
      visit(at, [reach, i](json::value& doc, const Edit& edit) { edit(reach(doc).get_array()[i]); });
      each_member(value.get_array()[i], at, visit, inner);
    }
  }
}

// The reader over `text` whole, then with each member replaced by each wrong kind of value:
// the reader never throws; where it refuses, it names a member on the path it was given.
template <typename Read>
void hostile_variants(const char* text, Read read) {
  const auto good = json::parse(text);
  REQUIRE_MESSAGE(read(good).ok(), read(good).error().message);
  std::size_t refused = 0;
  each_member(
      good, "",
      [&](const std::string& path, const std::function<void(json::value&, const Edit&)>& at) {
        for (const json::value& odd : {json::value(nullptr), json::value("text"), json::value(-1),
                                       json::value(json::array{}), json::value(json::object{}), json::value(1.5)}) {
          json::value doc = good;
          at(doc, [&odd](json::value& member) { member = odd; });
          CAPTURE(path);
          CAPTURE(json::serialize(doc));
          const auto result = read(doc);
          if (result.ok()) continue;
          ++refused;
          CHECK(result.error().code == ErrorCode::parse_error);
          const auto leaf = path.substr(path.find_last_of('.') == std::string::npos ? 0 : path.find_last_of('.') + 1);
          const auto top = path.substr(0, path.find_first_of(".["));
          CHECK_MESSAGE((contains(result.error().message, leaf.substr(0, leaf.find('['))) ||
                         contains(result.error().message, top)),
                        result.error().message);
        }
      },
      [](json::value& doc) -> json::value& { return doc; });
  CHECK(refused > 0);
  for (const json::value& wrong : {json::value(nullptr), json::value(json::array{}), json::value(json::object{}),
                                   json::value("{}"), json::value(0)}) {
    const auto result = read(wrong);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::parse_error);
  }
}

TEST_CASE("placement answers: a provider, its inventories and traits, as Placement writes them") {
  const auto provider = answers::provider(json::parse(kProvider));
  REQUIRE(provider.ok());
  CHECK(provider->name == "h1-numa0");
  CHECK(provider->parent_uuid == "r1");
  CHECK(answers::provider(json::parse(kRoot))->parent_uuid.empty());
  const auto inventories = answers::inventories(json::parse(kInventories));
  REQUIRE(inventories.ok());
  CHECK(inventories->at("VCPU") == InventoryRecord{96, 4, 96, 1});
  const auto traits = answers::traits(json::parse(kTraits));
  REQUIRE(traits.ok());
  CHECK(traits->generation == 3);
  CHECK(traits->traits == std::set<std::string>{"CUSTOM_HOSTAGENT", "HW_NUMA_ROOT"});
}

TEST_CASE("placement answers: listings, allocations, consumers and candidates, as Placement writes them") {
  const auto listing = answers::listing(json::parse(kListing));
  REQUIRE(listing.ok());
  REQUIRE(listing->size() == 2);
  CHECK(listing->at(1).uuid == "a1");
  CHECK(listing->at(1).provider.parent_uuid == "r1");
  CHECK(listing->at(0).provider.parent_uuid.empty());
  const auto held = answers::provider_allocations(json::parse(kProviderAllocations));
  REQUIRE(held.ok());
  CHECK(held->generation == 7);
  CHECK(held->consumers.at("c1") == Resources{{"MEMORY_MB", 65536}, {"VCPU", 8}});
  const auto consumer = answers::consumer(json::parse(kConsumer));
  REQUIRE(consumer.ok());
  CHECK(consumer->generation == 2);
  CHECK(consumer->consumer_type == "HOSTAGENT_VM");
  const auto none = answers::consumer(json::parse(R"({"allocations": {}})"));
  REQUIRE(none.ok());
  CHECK_FALSE(none->generation.has_value());
  const auto candidates = answers::allocation_candidates(json::parse(kCandidates));
  REQUIRE(candidates.ok());
  REQUIRE(candidates->size() == 1);
  CHECK(candidates->front().root_uuid == "r1");
  CHECK(candidates->front().mappings.at("_GPU0").at(0) == "g1");
}

TEST_CASE("placement answers: any member missing or of another type is a parse_error naming it, never a throw") {
  hostile_variants(kProvider, [](const json::value& v) { return answers::provider(v); });
  hostile_variants(kInventories, [](const json::value& v) { return answers::inventories(v); });
  hostile_variants(kTraits, [](const json::value& v) { return answers::traits(v); });
  hostile_variants(kListing, [](const json::value& v) { return answers::listing(v); });
  hostile_variants(kProviderAllocations, [](const json::value& v) { return answers::provider_allocations(v); });
  hostile_variants(kConsumer, [](const json::value& v) { return answers::consumer(v); });
  hostile_variants(kCandidates, [](const json::value& v) { return answers::allocation_candidates(v); });
}

TEST_CASE("placement answers: the messages say which member, and a candidate names a provider it summarises") {
  const auto listing = answers::listing(json::parse(R"({"resource_providers": [{"uuid": 5}]})"));
  REQUIRE_FALSE(listing.ok());
  CHECK(listing.error().message == "field 'resource_providers[0].uuid' is not a string");
  const auto empty = answers::allocation_candidates(
      json::parse(R"({"allocation_requests": [{"allocations": {}}], "provider_summaries": {}})"));
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message == "field 'allocation_requests[0].allocations' names no provider");
  const auto unsummarised = answers::allocation_candidates(json::parse(
      R"({"allocation_requests": [{"allocations": {"g9": {"resources": {"PGPU": 1}}}}], "provider_summaries": {}})"));
  REQUIRE_FALSE(unsummarised.ok());
  CHECK(unsummarised.error().message == "field 'provider_summaries' has no summary of provider g9");
}

}  // namespace
}  // namespace hostagent::fleet
