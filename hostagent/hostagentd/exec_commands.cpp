// hostagent/cli/exec_commands: the --exec command language.
#include "exec_commands.hpp"

#include <sstream>
#include <vector>

#include "hostagent/api/vm_json.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/text_file.hpp"

namespace hostagent::cli {
namespace {

std::vector<std::string> words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> result;
  for (std::string word; stream >> word;) result.push_back(word);
  return result;
}

Error usage(const std::string& command, const std::string& expected) {
  return Error{ErrorCode::invalid_argument, "--exec " + text::quoted(command) + ": expected \"" + expected + "\""};
}

Result<boost::json::value> view(Result<service::VmView> result) {
  if (!result.ok()) return std::move(result).error();
  return api::to_json(*result);
}

// An authorized_keys file: one key per line; blank lines and # comments skipped.
Result<std::vector<std::string>> key_lines(const std::string& file) {
  HA_TRY(const auto text, read_text_file(file));
  std::vector<std::string> keys;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.front() != '#') keys.push_back(line);
  }
  return keys;
}

Result<service::CreateVmRequest> create_request(const std::string& command, const std::vector<std::string>& args) {
  const std::string expected =
      "create NAME TEMPLATE [boot_image=PATH] [request_id=ID] [ssh_key_file=PATH | user_data_file=PATH]";
  if (args.size() < 3) return usage(command, expected);
  HA_TRY(auto name, VmName::parse(args[1], "name"));
  HA_TRY(auto template_name, TemplateName::parse(args[2], "template"));
  service::CreateVmRequest request{.name = std::move(name), .template_name = std::move(template_name)};
  for (std::size_t i = 3; i < args.size(); ++i) {
    const auto equals = args[i].find('=');
    const std::string key = args[i].substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : args[i].substr(equals + 1);
    if (key == "boot_image") {
      request.boot_image = value;
    } else if (key == "request_id") {
      request.request_id = value;
    } else if (key == "ssh_key_file") {
      HA_TRY(request.ssh_authorized_keys, key_lines(value));
    } else if (key == "user_data_file") {
      HA_TRY(request.user_data, read_text_file(value));
    } else {
      return usage(command, expected);
    }
  }
  return request;
}

Result<boost::json::value> list(service::VmService& service) {
  boost::json::array vms;
  for (const auto& vm : service.list_vms()) vms.push_back(api::to_json(vm));
  return boost::json::value(std::move(vms));
}

}  // namespace

Result<boost::json::value> run_exec_command(service::VmService& service, const std::string& command) {
  const auto args = words(command);
  const std::string verb = args.empty() ? "" : args[0];
  const bool named = args.size() == 2;
  if (verb == "create") {
    HA_TRY(const auto request, create_request(command, args));
    return view(create_vm(service, request));
  }
  if (verb == "list" && args.size() == 1) return list(service);
  if (verb == "status" && args.size() == 1) return api::to_json(service.status());
  const bool stop = verb == "stop" && (named || (args.size() == 3 && args[2] == "force"));
  // Only a verb that names a VM gets its word checked as a name: "frob x/y" is an unknown command.
  const bool names_vm = named && (verb == "show" || verb == "start" || verb == "reboot" || verb == "delete");
  if (names_vm || stop) {
    HA_TRY(const auto name, VmName::parse(args[1], "name"));
    if (verb == "show") return view(service.get_vm(name));
    if (verb == "start") return view(start_vm(service, name));
    if (verb == "reboot") return view(reboot_vm(service, name));
    if (stop) return view(stop_vm(service, name, args.size() == 3));
    if (verb == "delete") {
      HA_TRY_STATUS(delete_vm(service, name));
      return boost::json::value(boost::json::object{{"deleted", name.str()}});
    }
  }
  return Error{ErrorCode::invalid_argument, "--exec " + text::quoted(command) +
                                                ": unknown command; one of: create, show, list, "
                                                "status, start, stop, reboot, delete"};
}

}  // namespace hostagent::cli
