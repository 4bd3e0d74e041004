// vmtemplates/shape_reader (private): the template schema. Reads a merged, located YAML tree into a
// VmTemplate and reports every key, type, range and combination that is wrong. docs/templates.md is
// the same schema in prose; change both together.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/vmtemplates/vm_template.hpp"
#include "hostagent/vmtemplates/yaml_tree.hpp"

namespace hostagent::vmtemplates::detail {

using yaml::Problem;
using yaml::Value;

// Keys that describe one file rather than the shape: a child never inherits them.
extern const std::vector<std::string_view> kOwnKeys;

struct ReadOptions {
  // False when `extends` could not be followed: missing keys are then not reported, since the
  // parent that would have supplied them was never read.
  bool chain_resolved = true;
  // The name the file's name demands ("" when the text did not come from a file).
  std::string expected_name;
};

VmTemplate read_shape(const Value& root, const ReadOptions& options, std::vector<Problem>& problems);

// The known GPU models: "A100", "H100", ... in the order the docs list them.
std::vector<std::string_view> known_gpu_models();

}  // namespace hostagent::vmtemplates::detail
