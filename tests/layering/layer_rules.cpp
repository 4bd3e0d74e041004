// The layering check: the tables parsed, the tree walked, each quoted include resolved to the
// one file of the tree it names and judged by the two files' layers.
#include "layer_rules.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace hostagent::testing::layering {
namespace fs = std::filesystem;
namespace {

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// "| a | b |" -> {"a", "b"}.
std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::stringstream in(row.substr(1));
  std::string cell;
  // getline yields no empty piece after the closing '|'.
  while (std::getline(in, cell, '|')) cells.push_back(trim(cell));
  return cells;
}

bool is_separator(const std::vector<std::string>& cells) {
  return std::all_of(cells.begin(), cells.end(), [](const std::string& cell) {
    return !cell.empty() && cell.find_first_not_of("-: ") == std::string::npos;
  });
}

// The `quoted` items of a cell, in order.
std::vector<std::string> quoted_items(const std::string& cell) {
  static const std::regex item("`([^`]+)`");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(cell.begin(), cell.end(), item); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

std::set<std::string> names_of(const std::string& cell) {
  std::set<std::string> out;
  std::stringstream in(cell);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (!trim(name).empty()) out.insert(trim(name));
  }
  return out;
}

Error bad_line(int line, const std::string& why) {
  return Error{ErrorCode::parse_error, "docs/architecture.md:" + std::to_string(line) + ": " + why};
}

// The table rows between `begin` and its end marker, with their line numbers; header and
// separator rows left out.
Result<std::vector<std::pair<int, std::vector<std::string>>>> table(const std::string& markdown,
                                                                    const std::string& name) {
  std::stringstream in(markdown);
  std::string line;
  int number = 0;
  bool inside = false;
  bool found = false;
  bool header_seen = false;
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("<!-- " + name, 0) == 0) {
      inside = found = true;
      continue;
    }
    if (line.rfind("<!-- end " + name + " -->", 0) == 0) inside = false;
    if (!inside || line.empty() || line[0] != '|') continue;
    auto cells = cells_of(line);
    if (!header_seen || is_separator(cells)) {
      header_seen = true;
      continue;
    }
    rows.emplace_back(number, std::move(cells));
  }
  if (!found) return Error{ErrorCode::parse_error, "docs/architecture.md has no \"<!-- " + name + "\" table"};
  return rows;
}

Status read_layers(const std::string& markdown, Rules& rules) {
  HA_TRY(const auto rows, table(markdown, "layers"));
  std::map<std::string, std::string> owner;  // path -> layer
  for (const auto& [line, cells] : rows) {
    if (cells.size() != 3) return bad_line(line, "a layer row has 3 cells: layer, paths, may include");
    Layer layer{cells[0], quoted_items(cells[1]), names_of(cells[2])};
    if (layer.name.empty() || layer.paths.empty()) return bad_line(line, "a layer needs a name and `paths`");
    for (const auto& path : layer.paths) {
      if (!owner.emplace(path, layer.name).second) {
        return bad_line(line, "`" + path + "` is in layer " + owner[path] + " already");
      }
    }
    rules.layers.push_back(std::move(layer));
  }
  for (const auto& [line, cells] : rows) {
    for (const auto& name : names_of(cells[2])) {
      const bool known =
          std::any_of(rules.layers.begin(), rules.layers.end(), [&](const Layer& layer) { return layer.name == name; });
      if (!known) return bad_line(line, "\"" + name + "\" is no layer of the table");
    }
  }
  return ok_status();
}

Status read_debts(const std::string& markdown, Rules& rules) {
  HA_TRY(const auto rows, table(markdown, "debts"));
  for (const auto& [line, cells] : rows) {
    if (cells.size() != 3) return bad_line(line, "a debt row has 3 cells: file, includes, removed by");
    const auto file = quoted_items(cells[0]);
    const auto include = quoted_items(cells[1]);
    if (file.size() != 1 || include.size() != 1 || cells[2].empty()) {
      return bad_line(line, "a debt names one `file`, one `include` and what removes it");
    }
    rules.debts.emplace(file[0], include[0]);
  }
  return ok_status();
}

bool holds(const std::string& layer_path, const std::string& path) {
  if (layer_path.back() == '/') return path.rfind(layer_path, 0) == 0;
  return path == layer_path;
}

bool is_source(const fs::path& path) {
  const std::string name = path.filename().string();
  for (const char* suffix : {".cpp", ".hpp", ".h", ".cpp.in", ".hpp.in"}) {
    const std::string end(suffix);
    if (name.size() > end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0) return true;
  }
  return false;
}

// Every source under root, relative to it; hidden folders and build trees left out.
std::vector<std::string> sources_under(const fs::path& root) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name[0] == '.' || name.rfind("build", 0) == 0 || name == "__pycache__")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_source(it->path())) out.push_back(fs::relative(it->path(), root).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Tree {
  fs::path root;
  std::vector<std::string> sources;
  std::set<std::string> source_set;
};

// The one file an include names: beside the includer, else the one source whose path ends in it
// (an include directory's header). Otherwise a problem.
Result<std::string> resolve(const Tree& tree, const std::string& from, const std::string& include) {
  const std::string beside = fs::path(from).parent_path().append(include).lexically_normal().string();
  if (tree.source_set.count(beside) != 0) return beside;
  std::vector<std::string> matches;
  for (const auto& source : tree.sources) {
    if (source == include || (source.size() > include.size() && source.ends_with("/" + include))) {
      matches.push_back(source);
    }
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) return Error{ErrorCode::not_found, from + ": \"" + include + "\" names no file of the tree"};
  return Error{ErrorCode::conflict, from + ": \"" + include + "\" could be any of " + matches[0] + ", " + matches[1] +
                                        ": include it by its path below an include directory"};
}

}  // namespace

std::vector<std::string> quoted_includes(const fs::path& file) {
  static const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  return line_matches(file, include);
}

const Layer* find_layer(const Rules& rules, const std::string& name) {
  for (const auto& layer : rules.layers) {
    if (layer.name == name) return &layer;
  }
  return nullptr;
}

std::string allowed_list(const Layer& layer) {
  std::string out = layer.name;
  for (const auto& name : layer.may_include) out += ", " + name;
  return out;
}

std::vector<std::string> line_matches(const fs::path& file, const std::regex& pattern) {
  std::vector<std::string> out;
  std::ifstream in(file);
  std::string line;
  std::smatch match;
  while (std::getline(in, line)) {
    if (std::regex_search(line, match, pattern)) out.push_back(match[1].str());
  }
  return out;
}

Result<Rules> parse_rules(const std::string& markdown) {
  Rules rules;
  HA_TRY_STATUS(read_layers(markdown, rules));
  HA_TRY_STATUS(read_debts(markdown, rules));
  return rules;
}

std::string layer_of(const Rules& rules, const std::string& path) {
  std::string best;
  std::size_t best_length = 0;
  for (const auto& layer : rules.layers) {
    for (const auto& layer_path : layer.paths) {
      if (holds(layer_path, path) && layer_path.size() > best_length) {
        best = layer.name;
        best_length = layer_path.size();
      }
    }
  }
  return best;
}

std::vector<std::string> check_tree(const fs::path& root, const Rules& rules) {
  Tree tree{root, sources_under(root), {}};
  tree.source_set.insert(tree.sources.begin(), tree.sources.end());
  std::vector<std::string> problems;
  std::set<std::pair<std::string, std::string>> owed;
  for (const auto& source : tree.sources) {
    const std::string from_layer = layer_of(rules, source);
    if (from_layer.empty()) {
      problems.push_back(source + " is in no layer: add it, or its folder, to a layer's paths");
      continue;
    }
    const Layer& from = *find_layer(rules, from_layer);
    for (const auto& include : quoted_includes(root / source)) {
      auto target = resolve(tree, source, include);
      if (!target.ok()) {
        problems.push_back(target.error().message);
        continue;
      }
      const std::string to_layer = layer_of(rules, *target);
      if (to_layer.empty() || to_layer == from.name || from.may_include.count(to_layer) != 0) continue;
      if (rules.debts.count({source, include}) != 0) {
        owed.emplace(source, include);
        continue;
      }
      problems.push_back(source + " (" + from.name + ") includes \"" + include + "\" (" + to_layer + "): " + from.name +
                         " may include only " + allowed_list(from));
    }
  }
  for (const auto& debt : rules.debts) {
    if (owed.count(debt) == 0) {
      problems.push_back("debt paid: " + debt.first + " no longer includes \"" + debt.second +
                         "\" across a forbidden edge; remove its row from docs/architecture.md");
    }
  }
  return problems;
}

}  // namespace hostagent::testing::layering
