// hostagentctl's human views of the API's JSON documents (docs/api.md): tables for lists, field
// blocks for one thing. --json prints the documents themselves instead.
#pragma once

#include <boost/json/value.hpp>
#include <map>
#include <string>

#include "hostagent/api/api_client.hpp"

namespace hostagent::ctl {

std::string render_vms(const boost::json::value& vms);  // an array of VMs: one row each
std::string render_vm(const boost::json::value& vm);    // one VM with what it holds
// render_vm, then the timeline of the VM's newest create or start among `starts` (GET
// /v1/vms/NAME/starts: its last ten, kept until it is deleted), when there is one.
std::string render_vm_with_start(const boost::json::value& vm, const boost::json::value& starts);
std::string render_operations(const boost::json::value& operations);
std::string render_operation(const boost::json::value& operation);
std::string render_host(const boost::json::value& host);  // the topology document, summarized
std::string render_capacity(const boost::json::value& capacity);
std::string render_devices(const boost::json::value& devices);
std::string render_quarantine(const boost::json::value& quarantine);  // GET /v1/quarantine
std::string render_cleaning(const boost::json::value& cleaning);      // GET /v1/cleaning
// Two reads of GET /v1/vms/{name}/stats per VM, `before` and `after` (each VM's document, by name):
// one row per VM of `after` with its CPU use between the two (100% is one CPU busy), vCPUs,
// memory, RSS, and its disks' and interfaces' totals; "-" where a figure is unknown.
std::string render_vm_top(const std::map<std::string, boost::json::value>& before,
                          const std::map<std::string, boost::json::value>& after);
// GET /v1/host/maintenance: the mode, who, when, why; a drain's deadline and its VMs.
std::string render_maintenance(const boost::json::value& maintenance);
// GET /v1/devices/{address}/history: each cleaning with its steps; a broken evidence chain loudly.
std::string render_history(const boost::json::value& history);
std::string render_templates(const boost::json::value& templates);
std::string render_template(const boost::json::value& shape);
std::string render_status(const boost::json::value& status);
// One line per event: "41 operation op-12 create train-0: 3/5 define".
std::string render_event(const api::ServerEvent& event);

}  // namespace hostagent::ctl
