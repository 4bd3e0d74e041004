// libFuzzer target: arbitrary bytes as an answer of Placement, through each reader of
// fleet/placement_answers (the first byte picks the reader; the rest is the body, parsed as the
// client parses it). Besides what the sanitizers catch, it checks that a refusal is a parse_error
// (never an exception: the sync thread that reads these must never end) and that an accepted
// allocation candidate names a provider.
#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hostagent/fleet/placement_answers.hpp"

namespace {

using namespace hostagent;
namespace answers = fleet::answers;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_placement_answers: %s\n", what);
  std::abort();
}

template <typename T>
void judge(const Result<T>& read) {
  if (!read.ok() && read.error().code != ErrorCode::parse_error) broken("refused with another code than parse_error");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  boost::system::error_code ec;
  const auto value = boost::json::parse(body, ec);
  if (ec) return 0;  // the client refuses what is not JSON before any reader sees it
  switch (data[0] % 9) {
    case 0:
      judge(answers::provider(value));
      break;
    case 1:
      judge(answers::inventories(value));
      break;
    case 2:
      judge(answers::traits(value));
      break;
    case 3:
      judge(answers::generation(value, "resource_provider_generation"));
      break;
    case 4:
      judge(answers::listing(value));
      break;
    case 5:
      judge(answers::provider_allocations(value));
      break;
    case 6:
      judge(answers::consumer(value));
      break;
    case 7:
      judge(answers::allocations(value));
      break;
    default: {
      const auto candidates = answers::allocation_candidates(value);
      judge(candidates);
      if (candidates.ok()) {
        for (const auto& candidate : *candidates) {
          if (candidate.allocations.empty() || candidate.root_uuid.empty()) broken("a candidate without a provider");
        }
      }
    }
  }
  return 0;
}
