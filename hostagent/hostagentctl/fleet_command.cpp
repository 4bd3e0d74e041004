// hostagentctl fleet: candidates from Placement; create = claim, then the host's create with the claim.
#include "fleet_command.hpp"

#include <boost/json.hpp>
#include <chrono>
#include <iostream>
#include <random>
#include <set>

#include "hostagent/api/api_client.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/text_file.hpp"
#include "hostagent/fleet/candidates_query.hpp"
#include "hostagent/fleet/placement_answers.hpp"
#include "hostagent/fleet/placement_client.hpp"
#include "hostagent/vmtemplates/shape_request.hpp"
#include "progress.hpp"
#include "render_command.hpp"
#include "table.hpp"

namespace hostagent::ctl {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

int fail(std::ostream& err, const Error& error) {
  return print_failure(err, error);
}

struct Candidate {
  std::string root;  // the host's root provider
  std::string host;  // its name
  fleet::ProviderResources allocations;
  json::value mappings;
};

struct Offer {
  fleet::CandidatesQuery query;
  std::vector<Candidate> candidates;
  double seconds = 0;  // the allocation-candidates request alone
};

Result<std::unique_ptr<fleet::PlacementClient>> placement_client(const FleetArgs& args) {
  HA_TRY(auto token, read_token_file(args.placement_token_file, "--placement-token-file"));
  if (args.placement_url.empty()) {
    return Error{ErrorCode::invalid_argument, "--placement-url: Placement's endpoint is required (http://HOST:PORT)"};
  }
  return fleet::PlacementClient::make({args.placement_url, token.empty() ? "admin" : token, ""});
}

Result<fleet::CandidatesQuery> query_of(const FleetArgs& args) {
  HA_TRY(const auto shape, load_shape(args.template_ref, args.template_dirs));
  fleet::QueryOptions options;
  options.gpus_per_node = args.gpus_per_node;
  options.max_slots = args.max_slots;
  options.limit = args.limit;
  return fleet::candidates_query(vmtemplates::placement_request(shape), options);
}

// The candidates, each with its host's root provider; `names` (the roots carrying CUSTOM_HOSTAGENT,
// read in one request) names the hosts when set.
Result<Offer> offer(const FleetArgs& args, fleet::PlacementClient& placement, bool names) {
  Offer out;
  HA_TRY(out.query, query_of(args));
  std::map<std::string, std::string> roots;
  if (names) {
    HA_TRY(roots, placement.roots_with(fleet::kHostTrait));
  }
  auto start = Clock::now();
  auto answer = placement.get(out.query.target);
  if (!answer.ok() && answer.error().code == ErrorCode::invalid_argument) {
    // Placement refuses a query naming a trait or class it has never heard of, though no host has
    // it: create them (idempotent) and ask once more.
    for (const auto& trait : out.query.custom_traits) HA_TRY_STATUS(placement.ensure_trait(trait));
    for (const auto& rc : out.query.custom_classes) HA_TRY_STATUS(placement.ensure_resource_class(rc));
    start = Clock::now();
    answer = placement.get(out.query.target);
  }
  if (!answer.ok()) return answer.error();
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  HA_TRY(auto read, fleet::answers::allocation_candidates(*answer));
  for (auto& request : read) {
    Candidate candidate{request.root_uuid, "", std::move(request.allocations), std::move(request.mappings)};
    const auto root = roots.find(candidate.root);
    candidate.host = root == roots.end() ? candidate.root : root->second;
    out.candidates.push_back(std::move(candidate));
  }
  return out;
}

fleet::Resources totals(const fleet::ProviderResources& allocations) {
  fleet::Resources sum;
  for (const auto& [provider, resources] : allocations) {
    for (const auto& [rc, amount] : resources) sum[rc] += amount;
  }
  return sum;
}

json::object allocations_json(const fleet::ProviderResources& allocations) {
  json::object out;
  for (const auto& [provider, resources] : allocations) {
    json::object amounts;
    for (const auto& [rc, amount] : resources) amounts[rc] = amount;
    out[provider] = json::object{{"resources", amounts}};
  }
  return out;
}

std::string host_url(const std::string& pattern, const std::string& host) {
  std::string url = pattern;
  for (auto at = url.find("{host}"); at != std::string::npos; at = url.find("{host}", at + host.size())) {
    url.replace(at, 6, host);
  }
  return url;
}

// A claim still a claim, settled by the CLI that made it: released (`taken` false) when the create
// that was to take it failed, or handed over to the VM (type HOSTAGENT_VM) once the VM exists, so
// that a delete before the host's sync has run still removes it at once. Once the host wrote the
// VM's allocation over it, the host's sync owns it and this finds nothing to do.
void settle_claim(fleet::PlacementClient& placement, const std::string& consumer, bool taken, std::ostream& err) {
  auto state = placement.consumer(consumer);
  if (!state.ok() || state->allocations.empty() || state->consumer_type != fleet::kClaimConsumer) return;
  auto written = placement.write_allocations(fleet::rewrite_of(consumer, *state,
                                                               taken ? state->allocations : fleet::ProviderResources{},
                                                               taken ? fleet::kVmConsumer : fleet::kClaimConsumer));
  if (written.ok() || (taken && written.error().code == ErrorCode::conflict)) return;
  err << "hostagentctl: warning: claim " << consumer << " stays a claim (" << written.error().message << "); "
      << (taken ? "the host's sync makes it the VM's\n" : "the host's sync removes it after placement.claim_grace\n");
}

// One host's create with the claim, waited for: its error, or ok.
Status create_on(const FleetArgs& args, const std::string& template_name, const Candidate& candidate,
                 const std::string& consumer) {
  api::ClientOptions options;
  options.url = host_url(args.host_url, candidate.host);
  HA_TRY(options.token, read_token_file(args.host_token_file, "--host-token-file"));
  options.read_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_seconds * 1000));
  HA_TRY(auto client, api::ApiClient::make(options));
  json::value body =
      json::object{{"name", args.name},
                   {"template", template_name},
                   {"uuid", consumer},
                   {"request_id", "fleet-" + consumer},
                   {"placement", json::object{{"allocations", allocations_json(candidate.allocations)}}}};
  if (!args.boot_image.empty()) body.as_object()["boot_image"] = args.boot_image;
  HA_TRY(const auto operation, client->send_json("POST", "/v1/vms", body));
  std::ostringstream progress;
  HA_TRY(const auto ended, wait_for_operation(*client, operation, WaitSettings{}, progress));
  if (display(ended, "state") == "succeeded") return ok_status();
  // Room the host did not have after all (Placement was behind it) is worth another host; any other
  // failure (an image missing, a template the host lacks) is the operator's to see at once.
  const auto* error = ended.get_object().if_contains("error");
  const auto* code = error != nullptr && error->is_object() ? error->as_object().if_contains("code") : nullptr;
  const bool room =
      code != nullptr && code->is_string() && (code->as_string() == "does_not_fit" || code->as_string() == "conflict");
  return Error{room ? ErrorCode::does_not_fit : ErrorCode::internal, candidate.host + ": " + failure_message(ended)};
}

}  // namespace

int run_fleet_candidates(const FleetArgs& args, std::ostream& out, std::ostream& err) {
  auto placement = placement_client(args);
  if (!placement.ok()) return fail(err, placement.error());
  auto found = offer(args, **placement, true);
  if (!found.ok()) return fail(err, found.error());
  if (args.json) {
    json::array candidates;
    for (const auto& c : found->candidates) {
      candidates.push_back(json::object{{"host", c.host},
                                        {"root_provider_uuid", c.root},
                                        {"allocations", allocations_json(c.allocations)},
                                        {"mappings", c.mappings}});
    }
    out << json::serialize(json::object{{"request", found->query.target},
                                        {"combinations_per_host", found->query.combinations_per_host},
                                        {"seconds", found->seconds},
                                        {"candidates", candidates}})
        << "\n";
    return 0;
  }
  out << "GET " << found->query.target << "\n"
      << found->candidates.size() << " candidates in " << found->seconds << " s (at most "
      << found->query.combinations_per_host << " GPU slot combinations per host)\n";
  for (const auto& c : found->candidates) {
    out << "  " << c.host << ":";
    for (const auto& [rc, amount] : totals(c.allocations)) out << " " << rc << " " << amount;
    out << "\n";
  }
  return 0;
}

int run_fleet_create(const FleetArgs& args, std::ostream& out, std::ostream& err) {
  if (!is_name(args.name)) return fail(err, field_error("--name", std::string(kNameRule)));
  auto placement = placement_client(args);
  if (!placement.ok()) return fail(err, placement.error());
  auto shape = load_shape(args.template_ref, args.template_dirs);
  if (!shape.ok()) return fail(err, shape.error());
  std::mt19937_64 random{std::random_device{}()};
  std::optional<Error> last;
  for (int attempt = 1; attempt <= args.attempts; ++attempt) {
    auto found = offer(args, **placement, false);
    if (!found.ok()) return fail(err, found.error());
    if (found->candidates.empty()) {
      return fail(err,
                  last.value_or(Error{ErrorCode::does_not_fit, "Placement has no host with room for " + shape->name}));
    }
    // A random candidate, so that control planes claiming at once rarely race for the same one.
    auto candidate =
        found->candidates[std::uniform_int_distribution<std::size_t>(0, found->candidates.size() - 1)(random)];
    auto host = (*placement)->provider_name(candidate.root);  // a root's name is its host's
    if (!host.ok()) {
      last = host.error();
      continue;
    }
    candidate.host = *host;
    const std::string consumer = random_uuid();
    fleet::ConsumerWrite claim{consumer,          candidate.allocations, std::nullopt, fleet::kClaimConsumer,
                               "hostagent-fleet", "hostagent-fleet"};
    if (auto claimed = (*placement)->write_allocations(claim); !claimed.ok()) {
      last = claimed.error();  // another claim won the room: ask again
      continue;
    }
    if (auto created = create_on(args, shape->name, candidate, consumer); !created.ok()) {
      settle_claim(**placement, consumer, false, err);
      const bool retry =
          created.error().code == ErrorCode::does_not_fit || created.error().code == ErrorCode::unavailable;
      if (!retry) return fail(err, created.error());
      last = created.error();
      err << "hostagentctl: attempt " << attempt << " on " << candidate.host << ": " << created.error().message << "\n";
      continue;
    }
    settle_claim(**placement, consumer, true, err);
    if (args.json) {
      out << json::serialize(
                 json::object{{"name", args.name}, {"host", candidate.host}, {"uuid", consumer}, {"attempts", attempt}})
          << "\n";
    } else {
      out << "created " << args.name << " on " << candidate.host << " (uuid " << consumer << ", attempt " << attempt
          << ")\n";
    }
    return 0;
  }
  return fail(err, last.value_or(Error{ErrorCode::does_not_fit, "no attempt left"}));
}

}  // namespace hostagent::ctl
