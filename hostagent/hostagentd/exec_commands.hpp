// hostagent/cli/exec_commands (private): hostagentd --exec: one command line in, one JSON document
// out, through the same service calls the REST API makes.
#pragma once

#include <boost/json/value.hpp>
#include <string>

#include "hostagent/common/result.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::cli {

// Runs one command ("create NAME TEMPLATE [boot_image=PATH] [request_id=ID] [ssh_key_file=PATH |
// user_data_file=PATH]", "show NAME", "list",
// "status", "start NAME", "stop NAME [force]", "reboot NAME", "delete NAME").
Result<boost::json::value> run_exec_command(service::VmService& service, const std::string& command);

}  // namespace hostagent::cli
