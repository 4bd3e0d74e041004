// bench_fleet: hostagent against a real OpenStack Placement (scripts/placement.sh: Debian's
// placement-api 8.0, one uwsgi process and thread, SQLite). `bench_fleet [ROUNDS]` (default 15)
// measures, in one run:
//   - registration: a host's first full sync pass (its tree of 11 providers written), per host, as
//     hosts 1..100 join (each a copy of the simulated vela2, under a name of its own);
//   - allocation candidates for the 8-GPU and the 1-GPU shape at 50 and at 100 hosts, medians, with
//     the plainest request (GET /traits/CUSTOM_HOSTAGENT) in the same rounds as the baseline;
//   - a create (gx3-16x128x1h100, test:///) without Placement, then with the sync thread running (its
//     first pass done), and how long after the create began Placement holds the VM's allocation.
// Without Placement (HOSTAGENT_PLACEMENT_URL unset or not answering) it says so and exits 0. It
// removes every tree it made before it exits.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "assembly.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/placement_sync.hpp"
#include "hostagent/fleet/candidates_query.hpp"
#include "hostagent/fleet/placement_client.hpp"
#include "hostagent/service/vm_service.hpp"
#include "samples.hpp"
#include "scratch_dir.hpp"

namespace hostagent::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

Result<std::unique_ptr<service::VmService>> start_service(const ScratchDir& scratch, const std::string& url) {
  auto config = config::embedded_default_config("vela2", scratch.path());
  config.template_directories = {HOSTAGENT_SOURCE_DIR "/vmtemplates/templates"};
  config.placement.url = url;
  config.placement.host_name = "bench-" + random_uuid().substr(0, 8);
  HA_TRY(auto parts, cli::assemble_parts(config));
  return daemon::start_service(std::move(parts));
}

config::PlacementConfig host_config(const std::string& url, const std::string& name,
                                    const std::filesystem::path& token_file) {
  config::PlacementConfig config;
  config.url = url;
  config.host_name = name;
  config.token_file = token_file;  // "admin": noauth2's administrator
  return config;
}

std::string query_for(int gpus) {
  numa::PlacementRequest request;
  request.gpus = gpus;
  request.vfs_per_gpu = 1;
  request.vcpus = gpus == 8 ? 160 : 16;
  request.memory_bytes = (gpus == 8 ? 1792ULL : 128ULL) << 30;
  request.gpu_ids = {{0x10de, 0x2330}};
  fleet::QueryOptions options;
  options.max_slots = 8;
  return fleet::candidates_query(request, options).value().target;
}

// Median ms of each request, rounds interleaved so drift hits them alike; first the baseline.
std::vector<Samples> time_requests(fleet::PlacementClient& placement, const std::vector<std::string>& targets,
                                   int rounds, std::vector<std::size_t>& found) {
  std::vector<Samples> samples(targets.size());
  found.assign(targets.size(), 0);
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const auto start = Clock::now();
      auto answer = placement.get(targets[i]);
      samples[i].ms.push_back(ms_since(start));
      if (answer.ok() && answer->as_object().contains("allocation_requests")) {
        found[i] = answer->as_object().at("allocation_requests").as_array().size();
      }
    }
  }
  return samples;
}

void candidates_at(fleet::PlacementClient& placement, int hosts, int rounds) {
  const std::vector<std::string> targets{"/traits/" + std::string(fleet::kHostTrait), query_for(8), query_for(1)};
  std::vector<std::size_t> found;
  const auto samples = time_requests(placement, targets, rounds, found);
  const double base = samples[0].median();
  std::printf(
      "  %3d hosts: baseline GET /traits/CUSTOM_HOSTAGENT %.1f ms | 8 GPUs %.1f ms (x%.1f, %zu candidates) | "
      "1 GPU %.1f ms (x%.1f, %zu candidates, limit 50)\n",
      hosts, base, samples[1].median(), samples[1].median() / base, found[1], samples[2].median(),
      samples[2].median() / base, found[2]);
}

// The time a create takes with the sync thread on and off, and (on) until Placement holds it.
void create_cost(service::VmService& service, fleet::PlacementClient& placement, const ScratchDir& scratch,
                 const config::PlacementConfig& config, int rounds) {
  const auto image = scratch.path() / "images" / "boot.raw";
  std::filesystem::create_directories(image.parent_path());
  std::FILE* file = std::fopen(image.c_str(), "w");
  std::fclose(file);
  std::filesystem::resize_file(image, 1ULL << 30);
  Samples off;
  Samples on;
  Samples visible;
  // The arm without Placement first; then the sync thread, once its first (full) pass is done, for the
  // arm with it: a sync started per round would time its registration, not a create's cost.
  std::unique_ptr<daemon::PlacementSync> sync;
  for (int round = 0; round < 2 * rounds; ++round) {
    const bool with_sync = round >= rounds;
    if (with_sync && !sync) {
      sync = daemon::PlacementSync::start(service, cli::placement_client(config).value(), config,
                                          daemon::make_system_clock());
      while (sync->passes() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    service::CreateVmRequest request{.name = VmName::parse("bench-vm", "name").value(),
                                     .template_name = TemplateName::parse("gx3-16x128x1h100", "template").value(),
                                     .boot_image = image.string()};
    const auto start = Clock::now();
    auto created = service::create_vm(service, request);
    const double ms = ms_since(start);
    if (!created.ok()) {
      std::fprintf(stderr, "bench_fleet: create: %s\n", created.error().message.c_str());
      return;
    }
    (with_sync ? on : off).ms.push_back(ms);
    while (with_sync && ms_since(start) < 30000) {
      auto state = placement.consumer(created->uuid);
      if (state.ok() && !state->allocations.empty()) {
        visible.ms.push_back(ms_since(start));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    (void)service::delete_vm(service, request.name);
  }
  std::printf(
      "create (test:///, 1 GPU): without Placement %.2f ms, with the sync running %.2f ms (x%.2f); "
      "in Placement %.1f ms after the create began (median of %d)\n",
      off.median(), on.median(), on.median() / off.median(), visible.median(), rounds);
}

}  // namespace
}  // namespace hostagent::bench

int main(int argc, char** argv) {
  using namespace hostagent;
  using namespace hostagent::bench;
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  const int hosts = argc > 2 ? std::max(2, std::atoi(argv[2])) : 100;  // candidates measured at half and all
  const char* url_env = std::getenv("HOSTAGENT_PLACEMENT_URL");
  const std::string url = url_env == nullptr ? "" : url_env;
  auto placement = fleet::PlacementClient::make({url, "admin", ""});
  if (url.empty() || !placement.ok() || !(*placement)->get("/").ok()) {
    std::printf("bench_fleet: SKIPPED: no Placement at HOSTAGENT_PLACEMENT_URL ('%s'); scripts/placement.sh start\n",
                url.c_str());
    return 0;
  }
  const ScratchDir scratch("fleet");
  auto service = start_service(scratch, url);
  if (!service.ok()) {
    std::fprintf(stderr, "bench_fleet: %s\n", service.error().message.c_str());
    return 1;
  }
  std::printf(
      "bench_fleet: Placement %s (placement-api 8.0, 1 uwsgi process x 1 thread, SQLite), hosts are "
      "copies of simulated vela2 (11 providers each)\n",
      url.c_str());
  const std::string run = random_uuid().substr(0, 6);
  const auto token = scratch.path() / "placement-token";
  std::FILE* token_out = std::fopen(token.c_str(), "w");
  std::fputs("admin\n", token_out);
  std::fclose(token_out);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<std::string> names;
  Samples registration;
  for (int host = 1; host <= hosts; ++host) {
    names.push_back("bench-" + run + "-" + std::to_string(host));
    daemon::PlacementConverger converger(**service, **placement, host_config(url, names.back(), token),
                                         daemon::make_system_clock());
    const auto start = Clock::now();
    auto report = converger.run_once(true);
    registration.ms.push_back(ms_since(start));
    if (!report.ok()) {
      std::fprintf(stderr, "bench_fleet: register %s: %s\n", names.back().c_str(), report.error().message.c_str());
      return 1;
    }
    if (host == hosts / 2) {
      std::printf("registration (first full pass) of hosts 1-%d: median %.0f ms, p90 %.0f ms\n", host,
                  registration.median(), registration.p90());
      std::printf("allocation candidates, median of %d:\n", rounds);
      candidates_at(**placement, host, rounds);
    }
  }
  std::printf("registration of hosts 1-%d: median %.0f ms, p90 %.0f ms\n", hosts, registration.median(),
              registration.p90());
  candidates_at(**placement, hosts, rounds);
  create_cost(**service, **placement, scratch, host_config(url, names.front(), token), rounds);
  for (const auto& name : names) (void)fleet::remove_tree(**placement, fleet::provider_uuid(name, "root"));
  return 0;
}
