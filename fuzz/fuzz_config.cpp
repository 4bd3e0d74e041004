// libFuzzer target: arbitrary bytes as hostagentd's configuration file, through config::parse_config
// (the same YAML reader as templates, then every key checked into typed values). Besides what the
// sanitizers catch, it checks that a refusal is an invalid_argument (or not_found for a directory it
// names that this machine lacks) whose message is valid UTF-8,
// and that an accepted configuration's paths are absolute, as the reader promises.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hostagent/common/text.hpp"
#include "hostagent/config/daemon_config.hpp"

namespace {

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_config: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace hostagent;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto parsed = config::parse_config(text, "fuzz.yaml");
  if (parsed.ok()) {
    if (!parsed->state_directory.is_absolute()) broken("accepted a relative state directory");
    for (const auto& directory : parsed->image_directories) {
      if (!directory.is_absolute()) broken("accepted a relative image directory");
    }
    return 0;
  }
  // The reader also looks for the directories it names (templates.directories): not_found is this
  // machine's answer to a configuration that names none of them.
  const auto code = parsed.error().code;
  if (code != ErrorCode::invalid_argument && code != ErrorCode::not_found && code != ErrorCode::parse_error) {
    broken("refused with an unexpected code");  // parse_error: YAML that is broken, reported alone
  }
  if (text::valid_utf8(parsed.error().message) != parsed.error().message) broken("a refusal that is not valid UTF-8");
  return 0;
}
