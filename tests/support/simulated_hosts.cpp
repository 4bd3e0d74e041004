#include "simulated_hosts.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include "hostagent/common/sha256.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"

namespace hostagent::testing {
namespace {
namespace fs = std::filesystem;

// In the shared tree's top, beside sys/ and proc/, where discovery never reads.
constexpr const char* kManifest = ".manifest";

// The file's bytes, "" when it cannot be read: unlike read_text_file it never throws, since the
// check of a shared tree runs in a destructor.
std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One line per entry under root but the top's dotfiles, sorted: "PATH d", "PATH l TARGET" or
// "PATH f HASH-OF-ITS-BYTES". Links are listed, never followed (sysfs trees link back up).
std::vector<std::string> manifest_of(const fs::path& root) {
  std::vector<std::string> lines;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it); it.increment(ec)) {
    const std::string path = it->path().lexically_relative(root).string();
    if (it.depth() == 0 && path.front() == '.') continue;
    if (it->is_symlink(ec)) {
      lines.push_back(path + " l " + fs::read_symlink(it->path(), ec).string());
    } else if (it->is_directory(ec)) {
      lines.push_back(path + " d");
    } else {
      lines.push_back(path + " f " + sha256_hex(read_all(it->path())));
    }
  }
  if (ec) lines.push_back("! unreadable: " + ec.message());
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

// The first line where the two manifests part, worded for a failure message.
std::string first_difference(const std::vector<std::string>& was, const std::vector<std::string>& now) {
  const auto [a, b] = std::mismatch(was.begin(), was.end(), now.begin(), now.end());
  if (a == was.end() && b == now.end()) return "";
  if (a == was.end()) return "added: " + *b;
  if (b == now.end()) return "removed: " + *a;
  return "was \"" + *a + "\", now \"" + *b + "\"";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Trees (and drafts of killed processes) no test used for an hour: another build's, or a spec no
// test asks for any more. Each is moved aside whole first, so no test finds half of one.
void prune_unused(const fs::path& dir) {
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(1);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code entry_ec;
    if (fs::last_write_time(entry.path(), entry_ec) >= old || entry_ec) continue;
    const std::string name = entry.path().filename().string();
    fs::path aside = entry.path();  // one a killed process left aside already
    if (name.find(".pruned-") == std::string::npos) {
      aside = dir / (name + ".pruned-" + std::to_string(::getpid()));
      fs::rename(entry.path(), aside, entry_ec);
    }
    if (!entry_ec) fs::remove_all(aside, entry_ec);
  }
}

// The spec's shared tree, written when missing. Written beside its place and renamed into it: a
// process killed while writing leaves nothing that looks whole, and of two processes writing at
// once, the second's rename fails and it reads the first's.
fs::path shared_root(const simhost::HostSpec& spec) {
  const auto digest = simhost::tree_digest(spec);
  REQUIRE_MESSAGE(digest.ok(), digest.error().message);
  const fs::path dir = tests_scratch_parent() / "simulated";
  fs::path root = dir / (spec.name + "-" + *digest);
  std::error_code ec;
  if (fs::exists(root / kManifest, ec)) {
    fs::last_write_time(root, fs::file_time_type::clock::now(), ec);  // used: kept from prune_unused
    return root;
  }
  fs::create_directories(dir, ec);
  prune_unused(dir);
  const fs::path draft = dir / (spec.name + ".draft-" + std::to_string(::getpid()));
  // With simhost's stamp, so that a daemon given this tree keeps it (ensure_sysfs_tree).
  const auto written = simhost::ensure_sysfs_tree(spec, draft);
  REQUIRE_MESSAGE(written.ok(), written.error().message);
  std::ofstream(draft / kManifest) << joined(manifest_of(draft));
  // rename(2) puts the draft in place only where no tree is (ENOTEMPTY otherwise), so a tree
  // another process put there first, whole and maybe being read, is never removed.
  fs::rename(draft, root, ec);
  if (ec && !fs::exists(root / kManifest)) {
    // What is there has no manifest: a changed tree being removed. Moved aside whole, then ours in.
    const fs::path stale = dir / (spec.name + ".stale-" + std::to_string(::getpid()));
    fs::rename(root, stale, ec);
    fs::remove_all(stale, ec);
    fs::rename(draft, root, ec);
  }
  fs::remove_all(draft, ec);  // when another process's tree is in place
  REQUIRE_MESSAGE(fs::exists(root / kManifest), "no shared tree at " << root.string());
  return root;
}

simhost::HostSpec builtin(const std::string& name) {
  auto spec = simhost::builtin_host(name);
  REQUIRE_MESSAGE(spec.ok(), spec.error().message);
  return std::move(spec).value();
}

// The host discovered from its tree at root; its source reads "simulated:NAME", so outputs do not
// depend on where the tree lies.
numa::HostModel discovered(const fs::path& root, const std::string& name) {
  auto model = discovery::discover_from_sysfs(root);
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  model->source = "simulated:" + name;
  return std::move(model).value();
}

}  // namespace

numa::HostModel discover_simulated(const std::string& name, const TempDir& dir) {
  const auto written = simhost::write_sysfs_tree(builtin(name), dir.path());
  REQUIRE_MESSAGE(written.ok(), written.error().message);
  return discovered(dir.path(), name);
}

SharedHostTree::SharedHostTree(const std::string& name) : root_(shared_root(builtin(name))) {}

SharedHostTree::SharedHostTree(const simhost::HostSpec& spec) : root_(shared_root(spec)) {}

SharedHostTree::~SharedHostTree() {
  const auto was = lines_of(read_all(root_ / kManifest));
  const std::string difference = first_difference(was, manifest_of(root_));
  if (difference.empty()) return;
  std::error_code ec;
  fs::remove(root_ / kManifest, ec);  // first: no test reads a tree without it
  fs::remove_all(root_, ec);
  FAIL_CHECK("this test changed the shared simulated host tree " << root_.string() << " (" << difference
                                                                 << "); a test that writes a host tree "
                                                                    "writes its own");
}

numa::HostModel discover_shared(const std::string& name) {
  return discover_shared(builtin(name));
}

numa::HostModel discover_shared(const simhost::HostSpec& spec) {
  return discovered(shared_root(spec), spec.name);
}

}  // namespace hostagent::testing
