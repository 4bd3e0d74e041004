// hostagent/config/daemon_config: the configuration file read, checked and turned into one Error
// that lists all of its problems; and the embedded default the daemon runs with on any machine.
#include "hostagent/config/daemon_config.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <tuple>

#include "config_reader.hpp"
#include "hostagent/common/text_file.hpp"
#include "hostagent/vmtemplates/yaml_tree.hpp"

namespace hostagent::config {
namespace {

namespace fs = std::filesystem;
using vmtemplates::yaml::Problem;

// One line per problem, in file order, the first of them only (yaml::problem_lines).
std::string render_problems(std::vector<Problem> problems) {
  std::stable_sort(problems.begin(), problems.end(), [](const Problem& a, const Problem& b) {
    return std::tuple(a.at.line, a.at.column) < std::tuple(b.at.line, b.at.column);
  });
  return vmtemplates::yaml::problem_lines(problems);
}

void replace_once(std::string& text, std::string_view from, std::string_view to) {
  const auto at = text.find(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
}

// parse_yaml words broken YAML for templates, its first reader; an operator reading the daemon's
// configuration should not be told about templates.
Error broken_yaml(Error error) {
  replace_once(error.message, "expected a mapping of template keys", "expected a mapping of configuration keys");
  replace_once(error.message, "expected one template per file", "expected one configuration per file");
  return Error{ErrorCode::parse_error, std::move(error.message)};
}

Result<std::string> read_config_text(const fs::path& file) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (status.type() == fs::file_type::not_found) {
    return Error{ErrorCode::not_found,
                 "configuration file " + file.string() + " does not exist: create it, or pass --config"};
  }
  if (fs::is_directory(status)) {
    return Error{ErrorCode::invalid_argument,
                 "configuration file " + file.string() + " is a directory: pass the file itself"};
  }
  return read_text_file(file);
}

}  // namespace

Result<DaemonConfig> parse_config(const std::string& yaml, const std::string& source) {
  std::vector<Problem> problems;
  auto tree = vmtemplates::yaml::parse_yaml(yaml, source, problems);
  if (!tree.ok()) return broken_yaml(std::move(tree).error());
  DaemonConfig config = detail::read_config(*tree, problems);
  if (!problems.empty()) return Error{ErrorCode::invalid_argument, render_problems(std::move(problems))};
  config.source = source;
  return config;
}

Result<DaemonConfig> load_config(const fs::path& file) {
  HA_TRY(const std::string text, read_config_text(file));
  return parse_config(text, file.string());
}

DaemonConfig embedded_default_config(const std::string& simulated_host, const fs::path& scratch_directory) {
  DaemonConfig config;
  config.source = "<embedded>";
  config.libvirt_uri = "test:///default";
  config.domain_type = "test";
  config.simulated_host = simulated_host;
  config.state_directory = scratch_directory / "state";
  config.console_log_directory = scratch_directory / "console";
  config.image_directories = {scratch_directory / "images"};
  config.storage_pool = "default-pool";  // the one pool libvirt's test:///default driver defines
  config.api.listen = {"unix:" + (scratch_directory / "hostagent.sock").string()};
  config.api.audit_log = scratch_directory / "audit.log";
  config.devices.preparation = "libvirt";  // a simulated tree does not act on writes
  return config;
}

}  // namespace hostagent::config
