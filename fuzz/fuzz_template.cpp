// libFuzzer target: arbitrary bytes as a VM template, through the reader the daemon and hostagentctl
// use (vmtemplates::parse_template: the UTF-8 and nesting checks, yaml-cpp, the located tree, the
// checker and the shape reader), with a parent lookup that answers one fixed parent for any name,
// so `extends` chains run too. Besides what the sanitizers catch, it checks that a refusal is an
// invalid_argument whose message is valid UTF-8 and holds no more lines than the reader shows, and
// that an accepted template has a name by the project's rule.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace {

using namespace hostagent;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_template: %s\n", what);
  std::abort();
}

const char* const kParent =
    "name: base\nabstract: true\nvcpus: 8\nmemory: 64GiB\nhugepage_size: 1GiB\ngpus: {count: 1, model: H100}\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const vmtemplates::ParentLookup parent = [](const std::string& name) -> Result<std::pair<std::string, std::string>> {
    if (name == "base") return std::pair<std::string, std::string>(kParent, "base.yaml");
    return Error{ErrorCode::not_found, "no " + name + ".yaml"};
  };
  const auto parsed = vmtemplates::parse_template(text, "fuzz.yaml", parent);
  if (parsed.ok()) {
    if (!is_name(parsed->name)) broken("accepted a template whose name is not a name");
    return 0;
  }
  const auto& message = parsed.error().message;
  if (parsed.error().code != ErrorCode::invalid_argument && parsed.error().code != ErrorCode::not_found) {
    broken("refused with an unexpected code");
  }
  if (text::valid_utf8(message) != message) broken("a refusal that is not valid UTF-8");
  std::size_t lines = 1;
  for (const char c : message) lines += c == '\n' ? 1 : 0;
  if (lines > 51 + 1) broken("a refusal of more lines than the reader shows");
  return 0;
}
