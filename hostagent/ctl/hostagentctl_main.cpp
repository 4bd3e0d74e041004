// hostagentctl: the operator's and infra engineer's command line. Only wiring lives here.
#include <CLI/CLI.hpp>
#include <iostream>

#include "host_source.hpp"
#include "hostagent/api/host_json.hpp"
#include "hostagent/daemon/build_info.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "topology_report.hpp"

namespace {

int fail(const hostagent::Error& error) {
  std::cerr << "hostagentctl: " << hostagent::to_string(error.code) << ": " << error.message << "\n";
  return 1;
}

std::string simulated_help() {
  std::string names;
  for (const auto& name : hostagent::simhost::builtin_host_names()) names += (names.empty() ? "" : ", ") + name;
  return "Use a built-in simulated host (" + names + ")";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hostagentctl: inspect and drive hostagent on a GPU hypervisor host"};
  app.set_version_flag("--version", hostagent::version_string("hostagentctl"));
  app.require_subcommand(1);

  hostagent::ctl::HostSource source;
  bool as_json = false;
  auto* topology = app.add_subcommand("topology", "Show the host's NUMA nodes, PCIe switches and devices");
  auto* root = topology->add_option("--sysfs-root", source.sysfs_root, "Read sysfs under DIR (default /)");
  auto* xml = topology->add_option("--hwloc-xml", source.hwloc_xml, "Read an hwloc XML export (lstopo --of xml)");
  auto* sim = topology->add_option("--simulated", source.simulated, simulated_help());
  root->excludes(xml)->excludes(sim);
  xml->excludes(sim);
  topology->add_flag("--json", as_json, "Print the model as JSON (docs/topology-json.md)");

  CLI11_PARSE(app, argc, argv);

  if (topology->parsed()) {
    const auto model = hostagent::ctl::load_host(source);
    if (!model.ok()) return fail(model.error());
    std::cout << (as_json ? hostagent::api::to_pretty_json(hostagent::api::to_json(*model))
                          : hostagent::ctl::render_topology_report(*model));
  }
  return 0;
}
