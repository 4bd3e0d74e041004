// The link and namespace checks: each CMakeLists.txt of the layers read for its libraries, what
// each publishes and links, and each library's sources for the namespace they declare.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "layer_rules.hpp"

namespace hostagent::testing::layering {
namespace fs = std::filesystem;
namespace {

struct Command {
  std::string name;
  std::vector<std::string> args;
};

std::string read_all(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text with CMake's line comments dropped ('#' outside a quoted argument, to the line's end).
std::string without_comments(const std::string& text) {
  std::string clean;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') quoted = !quoted;
    if (text[i] == '#' && !quoted) {
      while (i < text.size() && text[i] != '\n') ++i;
    }
    if (i < text.size()) clean += text[i];
  }
  return clean;
}

// The arguments from `at` (just past a command's '(') to its closing ')', split at white space,
// quotes left out; `at` ends past the ')'.
std::vector<std::string> arguments_from(const std::string& text, std::size_t& at) {
  std::vector<std::string> args;
  std::string arg;
  int depth = 1;
  for (; at < text.size(); ++at) {
    const char c = text[at];
    if (c == '(') ++depth;
    if (c == ')' && --depth == 0) break;
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      if (!arg.empty()) args.push_back(arg);
      arg.clear();
    } else if (c != '"') {
      arg += c;
    }
  }
  if (!arg.empty()) args.push_back(arg);
  ++at;
  return args;
}

// CMake's commands as written: name(arg arg ...). Enough of the language for the tree's own files:
// no bracket arguments, no nested calls.
std::vector<Command> commands_of(const std::string& text) {
  static const std::regex head(R"(([A-Za-z_][A-Za-z0-9_]*)\s*\()");
  const std::string clean = without_comments(text);
  std::vector<Command> out;
  std::size_t at = 0;
  std::smatch match;
  while (at < clean.size() &&
         std::regex_search(clean.cbegin() + static_cast<std::ptrdiff_t>(at), clean.cend(), match, head)) {
    at += static_cast<std::size_t>(match.position(0) + match.length(0));
    out.push_back({match[1].str(), arguments_from(clean, at)});
  }
  return out;
}

struct Target {
  std::string name;
  std::string cmake_file;                           // relative to the root
  std::string layer;                                // its first source's; "" when it has none in a layer
  std::vector<std::string> sources;                 // relative to the root
  std::vector<std::string> include_dirs;            // relative to the root
  std::vector<std::string> public_dirs;             // the PUBLIC and INTERFACE ones
  std::vector<std::pair<std::string, bool>> links;  // (library, PUBLIC or INTERFACE)
};

std::string substituted(const std::string& arg, const std::map<std::string, std::string>& vars) {
  std::string out = arg;
  for (const auto& [name, value] : vars) {
    const std::string ref = "${" + name + "}";
    for (auto at = out.find(ref); at != std::string::npos; at = out.find(ref)) out.replace(at, ref.size(), value);
  }
  return out;
}

bool is_keyword(const std::string& arg) {
  static const std::set<std::string> keywords = {"STATIC", "SHARED",  "MODULE",           "OBJECT", "INTERFACE",
                                                 "PUBLIC", "PRIVATE", "EXCLUDE_FROM_ALL", "SYSTEM", "BEFORE"};
  return keywords.count(arg) != 0;
}

void read_cmake_file(const fs::path& root, const std::string& file, const Rules& rules,
                     std::map<std::string, Target>& targets) {
  const fs::path dir = fs::path(file).parent_path();
  const auto in_tree = [&](const std::string& arg) { return (dir / arg).lexically_normal().string(); };
  std::map<std::string, std::string> vars;
  for (const auto& command : commands_of(read_all(root / file))) {
    if (command.args.empty()) continue;
    const std::string& name = command.args[0];
    if (command.name == "set" && command.args.size() >= 2) vars[name] = command.args[1];
    if (command.name == "add_library" || command.name == "add_executable") {
      Target& target = targets[name];
      target.name = name;
      target.cmake_file = file;
      for (std::size_t i = 1; i < command.args.size(); ++i) {
        const std::string arg = substituted(command.args[i], vars);
        if (is_keyword(arg) || arg.find("${") != std::string::npos) continue;  // generated, or unknown
        target.sources.push_back(in_tree(arg));
        if (target.layer.empty()) target.layer = layer_of(rules, in_tree(arg));
      }
    }
    const auto found = targets.find(name);
    if (found == targets.end()) continue;
    bool is_public = true;  // the plain signature publishes
    for (std::size_t i = 1; i < command.args.size(); ++i) {
      const std::string arg = substituted(command.args[i], vars);
      if (arg == "PUBLIC" || arg == "INTERFACE" || arg == "PRIVATE") {
        is_public = arg != "PRIVATE";
        continue;
      }
      if (command.name == "target_link_libraries") found->second.links.emplace_back(arg, is_public);
      if (command.name == "target_include_directories" && !is_keyword(arg)) {
        found->second.include_dirs.push_back(in_tree(arg));
        if (is_public) found->second.public_dirs.push_back(in_tree(arg));
      }
    }
  }
}

bool is_header(const fs::path& path) {
  const auto extension = path.extension().string();
  return extension == ".hpp" || extension == ".h";
}

// The headers under `dir` (relative to the root), as an includer names them: by their path below it.
std::set<std::string> headers_below(const fs::path& root, const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root / dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file() && is_header(it->path())) out.insert(fs::relative(it->path(), root / dir).string());
  }
  return out;
}

// The headers in `dir` itself (relative to the root): a private header beside its sources.
std::set<std::string> headers_beside(const fs::path& root, const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(root / dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file() && is_header(it->path())) out.insert((dir / it->path().filename()).string());
  }
  return out;
}

std::set<std::string> headers_in(const fs::path& root, const std::vector<std::string>& dirs) {
  std::set<std::string> out;
  for (const auto& dir : dirs) {
    for (const auto& header : headers_below(root, dir)) out.insert(dir + "/" + header);
  }
  return out;
}

// What `target`'s public headers offer an includer, by include name.
std::set<std::string> offered(const fs::path& root, const Target& target) {
  std::set<std::string> out;
  for (const auto& dir : target.public_dirs) {
    const auto headers = headers_below(root, dir);
    out.insert(headers.begin(), headers.end());
  }
  return out;
}

std::set<std::string> includes_of(const fs::path& root, const std::set<std::string>& files) {
  std::set<std::string> out;
  for (const auto& file : files) {
    const auto found = quoted_includes(root / file);
    out.insert(found.begin(), found.end());
  }
  return out;
}

bool any_of_in(const std::set<std::string>& wanted, const std::set<std::string>& have) {
  return std::any_of(wanted.begin(), wanted.end(), [&](const std::string& item) { return have.count(item) != 0; });
}

// The CMakeLists.txt under the root but the harness's (which may link anything): the libraries and
// programs the layers are made of. A file in no layer (the root's, hostagent/'s) may define them
// too: each target takes the layer of its first source.
std::vector<std::string> cmake_files(const fs::path& root, const Rules& rules) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name[0] == '.' || name.rfind("build", 0) == 0)) {
      it.disable_recursion_pending();
      continue;
    }
    if (name != "CMakeLists.txt") continue;
    const std::string file = fs::relative(it->path(), root).string();
    const std::string layer = layer_of(rules, fs::path(file).parent_path().string() + "/");
    if (layer != "harness") out.push_back(file);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A target's own files: its sources, the headers beside them, and those under its include folders.
std::set<std::string> own_files(const fs::path& root, const Target& target) {
  std::set<std::string> files = headers_in(root, target.include_dirs);
  for (const auto& source : target.sources) {
    files.insert(source);
    const auto beside = headers_beside(root, fs::path(source).parent_path());
    files.insert(beside.begin(), beside.end());
  }
  return files;
}

std::map<std::string, Target> targets_of(const fs::path& root, const Rules& rules) {
  std::map<std::string, Target> targets;
  for (const auto& file : cmake_files(root, rules)) read_cmake_file(root, file, rules, targets);
  return targets;
}

// The namespace a library's files declare: hostagent::X for the hostagent/X/ folder its public
// headers are in; common, the base of every layer, is hostagent's own. "" for a target that
// publishes no hostagent/ folder (a program's pieces).
std::string namespace_of(const fs::path& root, const Target& target) {
  for (const auto& header : offered(root, target)) {
    const auto parts = fs::path(header);
    auto it = parts.begin();
    if (it == parts.end() || *it != "hostagent" || ++it == parts.end()) continue;
    const std::string folder = it->string();
    return folder == "common" ? "hostagent" : "hostagent::" + folder;
  }
  return "";
}

// hostagent::numa -> hostagent/numa/; hostagent -> hostagent/common/.
std::string folder_of(const std::string& expected) {
  if (expected == "hostagent") return "hostagent/common/";
  return "hostagent/" + expected.substr(std::string("hostagent::").size()) + "/";
}

std::set<std::string> namespaces_declared(const fs::path& file) {
  static const std::regex declared(R"(^\s*namespace\s+(hostagent(::[A-Za-z_][A-Za-z0-9_]*)*)\s*\{)");
  const auto found = line_matches(file, declared);
  return {found.begin(), found.end()};
}

}  // namespace

std::vector<std::string> check_namespaces(const fs::path& root, const Rules& rules) {
  std::set<std::string> problems;  // a header two libraries publish is judged once per library
  for (const auto& [name, target] : targets_of(root, rules)) {
    const std::string expected = namespace_of(root, target);
    if (target.layer.empty() || expected.empty()) continue;
    for (const auto& file : own_files(root, target)) {
      for (const auto& declared : namespaces_declared(root / file)) {
        if (declared == expected || declared.rfind(expected + "::", 0) == 0) continue;
        problems.insert(file + ": namespace " + declared + ", yet " + name + " publishes its headers as " +
                        folder_of(expected) + ": declare " + expected + " (or one inside it)");
      }
    }
  }
  return {problems.begin(), problems.end()};
}

std::vector<std::string> check_links(const fs::path& root, const Rules& rules) {
  const auto targets = targets_of(root, rules);
  std::vector<std::string> problems;
  for (const auto& [name, target] : targets) {
    if (target.layer.empty()) continue;
    const Layer* layer = find_layer(rules, target.layer);
    const auto included = includes_of(root, own_files(root, target));
    const auto published = includes_of(root, headers_in(root, target.public_dirs));
    for (const auto& [library, is_public] : target.links) {
      const auto linked = targets.find(library);
      if (linked == targets.end() || linked->second.layer.empty()) continue;  // not the tree's, or no layer's
      const std::string& to = linked->second.layer;
      const std::string where = target.cmake_file + ": " + name + " (" + target.layer + ") links " + library;
      if (to != target.layer && layer->may_include.count(to) == 0) {
        problems.push_back(where + " (" + to + "): " + target.layer + " may link only " + allowed_list(*layer));
        continue;
      }
      const auto headers = offered(root, linked->second);
      if (!any_of_in(headers, included)) {
        problems.push_back(where + ", yet none of its files includes a header of it: drop the link");
      } else if (is_public && !any_of_in(headers, published)) {
        problems.push_back(where + " PUBLIC, yet none of its public headers includes a header of it: link it PRIVATE");
      }
    }
  }
  return problems;
}

}  // namespace hostagent::testing::layering
