// The layering check: docs/architecture.md's two tables (the layers, with the paths each holds and
// the layers each may include; the forbidden includes the tree still has) read here, and a source
// tree checked against them. Parsing apart from the scan, so the checker's own tests feed it
// tables and trees of their own.
#pragma once

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::testing::layering {

struct Layer {
  std::string name;
  std::vector<std::string> paths;     // relative to the tree's root; a folder ends with '/'
  std::set<std::string> may_include;  // other layers' names; its own is always allowed
};

struct Rules {
  std::vector<Layer> layers;
  // (file, include as written): forbidden edges the tree still has, each to be removed.
  std::set<std::pair<std::string, std::string>> debts;
};

// The tables between "<!-- layers" and "<!-- end layers -->", and "<!-- debts" and
// "<!-- end debts -->". A malformed row, an unknown layer or a path in two layers is a parse_error
// naming the line.
Result<Rules> parse_rules(const std::string& markdown);

// The layer of a path relative to the root: the one with the longest path that is it or holds it;
// "" when none does.
std::string layer_of(const Rules& rules, const std::string& path);

// Every problem in the tree under root, one line each (empty when it keeps to the rules): a source
// in no layer, an include across a forbidden edge that no debt names, an include that names no
// file of the tree or more than one, and a debt the tree no longer has. Sources are .cpp, .hpp,
// .h and .in files under each layer's paths; quoted includes only.
std::vector<std::string> check_tree(const std::filesystem::path& root, const Rules& rules);

// Every problem in the CMakeLists.txt under root (the harness's left out), one line each: a
// library or program linking one of the tree's libraries whose layer its own may not include, a
// link none of its files needs (no file of it includes a header the linked library publishes), and
// a PUBLIC link none of its public headers needs. A target's layer is its first source's.
std::vector<std::string> check_links(const std::filesystem::path& root, const Rules& rules);

// Every file of a library (as check_links reads them) that declares a hostagent namespace other
// than its library's: hostagent::X, or one inside it, for a library publishing hostagent/X/
// headers; common's is hostagent itself. One line each.
std::vector<std::string> check_namespaces(const std::filesystem::path& root, const Rules& rules);

// The quoted includes of a file, as written, in order.
std::vector<std::string> quoted_includes(const std::filesystem::path& file);
// The layer named `name`; null for none.
const Layer* find_layer(const Rules& rules, const std::string& name);
// "layer, what it may include, ...": the words of a forbidden edge's problem.
std::string allowed_list(const Layer& layer);

// The first group of `pattern` in each line of `file` that it matches, in order: how the checks read
// includes and namespace declarations.
std::vector<std::string> line_matches(const std::filesystem::path& file, const std::regex& pattern);

}  // namespace hostagent::testing::layering
