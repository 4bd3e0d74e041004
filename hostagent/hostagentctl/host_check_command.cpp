// hostagentctl host check: facts, host model and templates to verdicts, printed.
#include "host_check_command.hpp"

#include <boost/json.hpp>
#include <ostream>

#include "hostagent/api/host_json.hpp"
#include "hostagent/virt/hypervisor.hpp"
#include "table.hpp"

namespace hostagent::ctl {
namespace {

boost::json::value checks_json(const std::vector<hostcheck::Check>& checks) {
  boost::json::array out;
  for (const auto& check : checks) {
    out.emplace_back(boost::json::object{{"check", check.name},
                                         {"result", hostcheck::to_string(check.verdict)},
                                         {"found", check.found},
                                         {"fix", check.fix}});
  }
  return boost::json::object{{"checks", std::move(out)}};
}

hostcheck::StackVersion split(const virt::Version& v) {
  return {v.major, v.minor, v.release};
}

// The live host's libvirtd, asked for its versions; why not, when it does not answer.
hostcheck::StackFacts stack_of(const std::string& uri) {
  hostcheck::StackFacts out;
  auto hypervisor = virt::connect_libvirt(virt::LibvirtOptions{uri, "", std::chrono::seconds(5)});
  if (!hypervisor.ok()) {
    out.unreachable = uri + ": " + hypervisor.error().message;
    return out;
  }
  const auto versions = (*hypervisor)->versions();
  if (!versions.ok()) {
    out.unreachable = uri + ": " + versions.error().message;
    return out;
  }
  out.libvirt = split(versions->libvirt);
  out.qemu = split(versions->qemu);
  return out;
}

Result<std::vector<hostcheck::Check>> checks_of(const HostCheckArgs& args) {
  HA_TRY(const auto host, load_host_root(args.host));
  HA_TRY(const auto root, SysfsRoot::open(host.root));
  HA_TRY(auto facts, hostcheck::read_facts(root));
  const bool live = !args.host.sysfs_root && !args.host.hwloc_xml && !args.host.simulated;
  if (live) facts.stack = stack_of(args.connect);
  HA_TRY(const auto templates, vmtemplates::load_template_dirs(args.template_dirs));
  std::vector<vmtemplates::VmTemplate> shapes;
  shapes.reserve(templates.size());
  for (const auto& [name, shape] : templates) shapes.push_back(shape);
  hostcheck::CheckOptions options;
  HA_TRY(options.policy.housekeeping_cpus, parse_cpu_list(args.housekeeping_cpus));
  return hostcheck::check_host(facts, host.model, shapes, options);
}

}  // namespace

std::string render_checks(const std::vector<hostcheck::Check>& checks) {
  Table table({"CHECK", "RESULT", "FOUND"});
  std::string fixes;
  for (const auto& check : checks) {
    table.add_row({check.name, std::string(hostcheck::to_string(check.verdict)), check.found});
    if (check.verdict != hostcheck::Verdict::pass) fixes += "  " + check.name + ": " + check.fix + "\n";
  }
  return table.render() + (fixes.empty() ? "" : "\nto fix:\n" + fixes);
}

int run_host_check(const HostCheckArgs& args, std::ostream& out, std::ostream& err) {
  const auto checks = checks_of(args);
  if (!checks.ok()) {
    err << "hostagentctl: " << to_string(checks.error().code) << ": " << checks.error().message << "\n";
    return 2;
  }
  out << (args.json ? api::to_pretty_json(checks_json(*checks)) : render_checks(*checks));
  for (const auto& check : *checks) {
    if (check.verdict == hostcheck::Verdict::fail) return 1;
  }
  return 0;
}

}  // namespace hostagent::ctl
