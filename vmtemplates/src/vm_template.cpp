// vmtemplates/vm_template: loading templates from text, files and directories, and following
// `extends`. The chain is merged into one located tree first and checked once, so a problem in an
// inherited key is reported once, at its line in the parent's file.
#include "hostagent/vmtemplates/vm_template.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <tuple>

#include "hostagent/common/named_file.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/text_file.hpp"
#include "hostagent/vmtemplates/yaml_checker.hpp"
#include "hostagent/vmtemplates/yaml_tree.hpp"
#include "shape_reader.hpp"

namespace hostagent::vmtemplates {
namespace {

namespace fs = std::filesystem;
using yaml::Problem;
using yaml::Value;

constexpr std::size_t kMaxChain = 16;  // deeper than any fleet needs; stops a lookup that never ends

std::string chain_text(const std::vector<std::string>& names, const std::string& last) {
  std::string text;
  for (const auto& name : names) text += name + " -> ";
  return text + last;
}

// Follows `extends` from one template to the root of its chain, merging as it returns.
class ChainLoader {
 public:
  ChainLoader(const ParentLookup& find_parent, std::vector<Problem>& problems)
      : find_parent_(find_parent), problems_(problems), check_(problems) {}

  Result<Value> load(const std::string& yaml, const std::string& source, const std::string& lookup_name) {
    HA_TRY(Value tree, yaml::parse_yaml(yaml, source, problems_));
    sources_.push_back(source);
    names_.push_back(lookup_name.empty() ? own_name(tree, source) : lookup_name);
    if (!lookup_name.empty()) check_parent(tree, lookup_name);
    const Entry* extends = tree.kind == Value::Kind::mapping ? tree.find("extends") : nullptr;
    if (extends == nullptr || extends->value.is_null()) return tree;
    HA_TRY(auto parent, load_parent(extends->value));
    if (!parent) return tree;
    return yaml::merge(yaml::without_keys(*parent, detail::kOwnKeys), tree);
  }

  bool resolved() const { return resolved_; }
  const std::vector<std::string>& sources() const { return sources_; }

 private:
  using Entry = yaml::Entry;

  static std::string own_name(const Value& tree, const std::string& source) {
    const Entry* name = tree.kind == Value::Kind::mapping ? tree.find("name") : nullptr;
    return name != nullptr && name->value.kind == Value::Kind::scalar ? name->value.scalar : source;
  }

  // A parent's own problems surface through the merged tree; only what the merge hides is checked here.
  void check_parent(const Value& tree, const std::string& lookup_name) {
    if (tree.kind != Value::Kind::mapping && !tree.is_null()) {
      check_.report(tree.at, "", yaml::describe(tree), "a mapping of template keys");
      resolved_ = false;
      return;
    }
    const Entry* name = tree.find("name");
    if (name != nullptr && name->value.kind == Value::Kind::scalar && name->value.scalar != lookup_name) {
      check_.report(name->value.at, "name", yaml::describe(name->value),
                    "\"" + lookup_name + "\", the name it was found by");
    }
  }

  // nullopt (not an Error) when the problem is already reported and the child can still be checked.
  Result<std::optional<Value>> load_parent(const Value& extends) {
    const auto parent = check_.name(extends, "extends");
    if (!parent) return fail_softly();
    const std::string where = yaml::to_string(extends.at) + ": extends: ";
    if (std::find(names_.begin(), names_.end(), *parent) != names_.end()) {
      return Error{ErrorCode::invalid_argument,
                   where + "found a cycle " + chain_text(names_, *parent) + ", expected a chain of parents that ends"};
    }
    if (names_.size() >= kMaxChain) {
      return Error{ErrorCode::invalid_argument, where + "found a chain of more than 16 templates, expected at most 16"};
    }
    if (!find_parent_) {
      check_.report(extends.at, "extends", yaml::describe(extends),
                    "no extends here: parents are looked up only when templates are loaded from files");
      return fail_softly();
    }
    auto found = find_parent_(*parent);
    if (!found.ok()) {
      return Error{found.error().code,
                   where + "found \"" + *parent + "\", expected a parent template (" + found.error().message + ")"};
    }
    HA_TRY(Value tree, load(found->first, found->second, *parent));
    return std::optional<Value>(std::move(tree));
  }

  Result<std::optional<Value>> fail_softly() {
    resolved_ = false;
    return std::optional<Value>();
  }

  const ParentLookup& find_parent_;
  std::vector<Problem>& problems_;
  yaml::Checker check_;
  std::vector<std::string> names_;    // the chain so far, for cycle messages
  std::vector<std::string> sources_;  // child first: problems are listed in this order
  bool resolved_ = true;
};

// One line per problem, the child's file first, then by position.
std::string render_problems(std::vector<Problem> problems, const std::vector<std::string>& sources) {
  const auto rank = [&](const Problem& p) {
    return std::find(sources.begin(), sources.end(), p.at.source) - sources.begin();
  };
  std::stable_sort(problems.begin(), problems.end(), [&](const Problem& a, const Problem& b) {
    return std::tuple(rank(a), a.at.line, a.at.column) < std::tuple(rank(b), b.at.line, b.at.column);
  });
  return yaml::problem_lines(problems);
}

Result<VmTemplate> parse_checked(const std::string& yaml, const std::string& source, const ParentLookup& find_parent,
                                 const std::string& expected_name) {
  std::vector<Problem> problems;
  ChainLoader chain(find_parent, problems);
  HA_TRY(Value merged, chain.load(yaml, source, ""));
  VmTemplate shape = detail::read_shape(merged, {chain.resolved(), expected_name}, problems);
  if (!problems.empty()) return Error{ErrorCode::invalid_argument, render_problems(problems, chain.sources())};
  shape.source = source;
  return shape;
}

// A template file is opened beneath its directory (common/named_file): a symlink in a template
// directory may lead to another file there, never out of it; never a FIFO or /dev/zero, never more
// than a text file may hold.
Result<std::string> read_text(const fs::path& file) {
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    return Error{ErrorCode::invalid_argument, file.string() + ": found a directory, expected a template file"};
  }
  const fs::path directory = file.has_parent_path() ? file.parent_path() : fs::path(".");
  auto opened = open_beneath(directory, file.filename(), FileLimits{kMaxTextFileBytes, false}, "template file");
  if (!opened.ok()) {
    if (opened.error().code == ErrorCode::not_found) return errno_error(ENOENT, "read", file.string());
    auto error = std::move(opened).error();
    error.field.clear();  // a file, not a request's field
    return error;
  }
  return read_opened(*opened, kMaxTextFileBytes, "template file");
}

std::string place_list(const std::vector<fs::path>& dirs) {
  std::string text;
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == dirs.size() ? " or " : ", ") + dirs[i].string();
  }
  return text;
}

// The *.yaml files of dir, sorted so that loading is the same on every host.
Result<std::vector<fs::path>> yaml_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error{ErrorCode::not_found, "template directory " + dir.string() + " does not exist"};
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    // Dot files are editors' swap and backup files, not templates.
    if (path.extension() == ".yaml" && !path.filename().string().starts_with(".")) files.push_back(path);
  }
  if (ec) return errno_error(ec.value(), "list", dir.string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Result<VmTemplate> parse_template(const std::string& yaml, const std::string& source, const ParentLookup& find_parent) {
  return parse_checked(yaml, source, find_parent, "");
}

namespace {

// Loads FILE with parents looked up in `places`, in order.
Result<VmTemplate> load_with_parents(const fs::path& file, const std::vector<fs::path>& places) {
  HA_TRY(const std::string text, read_text(file));
  return parse_checked(text, file.string(), directory_lookup(places), file.stem().string());
}

}  // namespace

ParentLookup directory_lookup(std::vector<fs::path> places, ParentSource source) {
  return [places = std::move(places), source](const std::string& name) -> Result<std::pair<std::string, std::string>> {
    if (!is_name(name))
      return field_error("extends", text::quoted(name) + " is not a template name: " + std::string(kNameRule));
    for (const auto& dir : places) {
      // Beside a bare "gx3d.yaml" is ".": name the parent "base.yaml", as the user would, not "./base.yaml".
      const fs::path candidate = dir == "." ? fs::path(name + ".yaml") : dir / (name + ".yaml");
      std::error_code ec;
      if (!fs::is_regular_file(candidate, ec)) continue;
      HA_TRY(std::string parent_text, read_text(candidate));
      return std::pair{std::move(parent_text),
                       source == ParentSource::file_name ? candidate.filename().string() : candidate.string()};
    }
    if (source == ParentSource::file_name)
      return Error{ErrorCode::not_found, "no " + name + ".yaml in the template directories"};
    return Error{ErrorCode::not_found, "no " + name + ".yaml in " + place_list(places)};
  };
}

Result<VmTemplate> load_template_file(const fs::path& file, const std::vector<fs::path>& search_dirs) {
  // Beside the file first: a parent its author keeps next to it is the one they mean, whether the
  // file is validated or rendered.
  std::vector<fs::path> places{file.has_parent_path() ? file.parent_path() : fs::path(".")};
  places.insert(places.end(), search_dirs.begin(), search_dirs.end());
  return load_with_parents(file, places);
}

Result<std::map<std::string, VmTemplate>> load_template_dirs(const std::vector<fs::path>& dirs) {
  // Parents are looked up latest directory first, so an operator's base overrides the shipped one for
  // every template that extends it, shipped ones included.
  const std::vector<fs::path> parents_first(dirs.rbegin(), dirs.rend());
  std::map<std::string, VmTemplate> templates;
  for (const auto& dir : dirs) {
    HA_TRY(const auto files, yaml_files(dir));
    for (const auto& file : files) {
      HA_TRY(VmTemplate shape, load_with_parents(file, parents_first));
      templates.erase(shape.name);  // an abstract override hides the shipped shape too
      if (!shape.abstract) templates.emplace(shape.name, std::move(shape));
    }
  }
  return templates;
}

}  // namespace hostagent::vmtemplates
