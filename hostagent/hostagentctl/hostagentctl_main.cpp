// hostagentctl: the operator's and infra engineer's command line. Only wiring lives here: the
// offline commands (topology, render, verify-guest, template validate) and the API's (api_commands).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "api_commands.hpp"
#include "fleet_command.hpp"
#include "host_check_command.hpp"
#include "host_source.hpp"
#include "hostagent/api/host_json.hpp"
#include "hostagent/program_support/build_info.hpp"
#include "hostagent/program_support/command_line.hpp"
#include "hostagent/program_support/install_paths.hpp"
#include "render_command.hpp"
#include "table.hpp"
#include "template_command.hpp"
#include "topology_report.hpp"
#include "verify_command.hpp"

namespace {

using hostagent::ctl::HostSource;

int fail(const hostagent::Error& error) {
  return hostagent::ctl::print_failure(std::cerr, error);
}

std::string simulated_help() {
  return "Use a built-in simulated host (" + hostagent::program_support::simulated_host_list() + ")";
}

// --sysfs-root, --hwloc-xml and --simulated: one of them, or the live host.
void add_host_options(CLI::App* command, HostSource& source) {
  auto* root = command->add_option("--sysfs-root", source.sysfs_root, "Read sysfs under DIR (default /)");
  auto* xml = command->add_option("--hwloc-xml", source.hwloc_xml, "Read an hwloc XML export (lstopo --of xml)");
  auto* sim = command->add_option("--simulated", source.simulated, simulated_help());
  root->excludes(xml)->excludes(sim);
  xml->excludes(sim);
}

int run_topology(const HostSource& source, bool as_json) {
  const auto model = hostagent::ctl::load_host(source);
  if (!model.ok()) return fail(model.error());
  std::cout << (as_json ? hostagent::api::to_pretty_json(hostagent::api::to_json(*model))
                        : hostagent::ctl::render_topology_report(*model));
  return 0;
}

// The whole command line: parsed, then the one command it names run.
int run(int argc, char** argv) {
  CLI::App app{"hostagentctl: inspect and drive hostagent on a GPU hypervisor host"};
  app.set_version_flag("--version", hostagent::program_support::version_string("hostagentctl"));
  app.require_subcommand(1);
  // The API's connection options (--socket, --json, ...) are the top's, given anywhere on the line.
  app.fallthrough();

  HostSource topology_source;
  bool as_json = false;
  auto* topology = app.add_subcommand("topology", "Show the host's NUMA nodes, PCIe switches and devices");
  add_host_options(topology, topology_source);
  topology->add_flag("--json", as_json, "Print the model as JSON (docs/topology-json.md)");

  hostagent::ctl::RenderArgs render_args;
  std::vector<std::string> template_dirs;
  auto* render = app.add_subcommand("render", "Place a template on a host and write its libvirt domain");
  render->add_option("--template", render_args.template_ref, "Template file, or the name of a shipped template")
      ->required();
  add_host_options(render, render_args.host);
  render->add_option("--name", render_args.name, "Domain name")->capture_default_str();
  render->add_option("--output-dir", render_args.output_dir,
                     "Write domain.xml, placement.json and nccl-topology.xml here (default: print the domain)");
  render->add_option("--domain-type", render_args.domain_type, "libvirt domain type")
      ->check(CLI::IsMember({"kvm", "qemu", "test"}))
      ->capture_default_str();
  render->add_option("--housekeeping-cpus", render_args.housekeeping_cpus,
                     "Host CPUs kept for the host (cpulist, e.g. 0-7,96-103): never pinned, run emulator threads");
  render->add_option("--template-dir", template_dirs, "Where templates named by --template or extends: live");

  hostagent::ctl::VerifyArgs verify_args;
  auto* verify = app.add_subcommand("verify-guest",
                                    "Boot a stand-in of a template's guest and check that it sees the host's topology");
  verify->add_option("--template", verify_args.render.template_ref, "Template file, or the name of a shipped template")
      ->required();
  add_host_options(verify, verify_args.render.host);
  verify->add_option("--template-dir", template_dirs, "Where templates named by --template or extends: live");
  verify->add_option("--housekeeping-cpus", verify_args.render.housekeeping_cpus,
                     "Host CPUs kept for the host (cpulist): never pinned to vCPUs");
  verify->add_option("--connect", verify_args.connect, "libvirt URI to boot the stand-in through")
      ->capture_default_str();
  verify->add_option("--name", verify_args.name, "The stand-in domain's name (default hostagent-verify-PID)");
  verify->add_option("--kernel", verify_args.kernel, "The probe guest's kernel (default: the newest /boot/vmlinuz-*)");
  verify->add_option("--busybox", verify_args.busybox, "A static busybox for the probe's initramfs")
      ->capture_default_str();
  verify->add_option("--firmware", verify_args.firmware, "Guest firmware: the template's, or bios or efi")
      ->check(CLI::IsMember({"template", "bios", "efi"}))
      ->capture_default_str();
  verify->add_option("--domain-type", verify_args.domain_type, "qemu (TCG, no KVM needed) or kvm")
      ->check(CLI::IsMember({"qemu", "kvm"}))
      ->capture_default_str();
  verify->add_option("--vcpus-per-cell", verify_args.vcpus_per_cell, "The stand-in's vCPUs per guest cell")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  verify->add_option("--memory-per-cell", verify_args.memory_per_cell_mib, "The stand-in's MiB per guest cell")
      ->check(CLI::Range(64, 65536))
      ->capture_default_str();
  verify
      ->add_option("--hugepages", verify_args.hugepages,
                   "Back the stand-in's cells with hugepages: auto (the template's size, else one this machine "
                   "has room in, else none), none, 2M or 1G")
      ->check(CLI::IsMember({"auto", "none", "2M", "1G"}))
      ->capture_default_str();
  verify->add_option("--timeout", verify_args.timeout_s, "Seconds from start to power-off before giving up")
      ->check(CLI::Range(10, 3600))
      ->capture_default_str();
  verify->add_option("--work-dir", verify_args.work_dir,
                     "Where the probe image and console log go (default: a new directory under /var/tmp)");
  verify->add_flag("--keep", verify_args.keep, "Keep the work directory when the guest matches too");

  std::vector<std::string> validate_files;
  auto* templates = app.add_subcommand("template", "Work with VM templates");
  templates->require_subcommand(1);
  auto* validate = templates->add_subcommand("validate", "Check template files; every error with file:line:column");
  validate->add_option("files", validate_files, "Template files")->required();
  validate->add_option("--template-dir", template_dirs, "Where templates named by extends: live");

  hostagent::ctl::FleetArgs fleet_args;
  auto* fleet =
      app.add_subcommand("fleet", "A fleet's hosts in OpenStack Placement: candidates, and creates through it");
  fleet->require_subcommand(1);
  auto* candidates = fleet->add_subcommand("candidates", "Ask Placement which hosts can take a template");
  auto* fleet_create =
      fleet->add_subcommand("create", "Claim a candidate in Placement and create the VM on that host with the claim");
  for (auto* command : {candidates, fleet_create}) {
    command->add_option("--placement-url", fleet_args.placement_url, "Placement's endpoint (http(s)://HOST:PORT)")
        ->envname("HOSTAGENT_PLACEMENT_URL")
        ->required();
    command->add_option("--placement-token-file", fleet_args.placement_token_file,
                        "File holding Placement's X-Auth-Token (default: admin, for noauth2)");
    command->add_option("--template", fleet_args.template_ref, "Template file, or the name of a shipped template")
        ->required();
    command->add_option("--template-dir", template_dirs, "Where templates named by --template or extends: live");
    command->add_option("--gpus-per-node", fleet_args.gpus_per_node, "GPUs one guest cell takes at most")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    command->add_option("--max-slots", fleet_args.max_slots, "The most GPUs a host of the fleet has")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    command->add_option("--limit", fleet_args.limit, "Candidates Placement returns")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    command->add_flag("--json", fleet_args.json, "Print JSON");
  }
  fleet_create->add_option("--name", fleet_args.name, "The VM's name")->required();
  fleet_create
      ->add_option("--host-url", fleet_args.host_url,
                   "Each host's API; {host} becomes the host's name in Placement (unix:PATH or https://HOST:PORT)")
      ->capture_default_str();
  fleet_create->add_option("--host-token-file", fleet_args.host_token_file, "File holding the hosts' bearer token");
  fleet_create->add_option("--boot-image", fleet_args.boot_image,
                           "The VM's boot image on the host (inside its images.directories)");
  fleet_create->add_option("--attempts", fleet_args.attempts, "Candidates to try before giving up")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();

  hostagent::ctl::ApiCommands api_commands(app, *templates);

  // Under `host` with the API's show and capacity, but read from this host's kernel, not the
  // daemon: it is what to run when the daemon will not start.
  hostagent::ctl::HostCheckArgs check_args;
  auto* check = app.get_subcommand("host")->add_subcommand(
      "check", "Check this host's prerequisites for fast, correct VM starts: pass, warn or fail, with the fix");
  add_host_options(check, check_args.host);
  check->add_option("--housekeeping-cpus", check_args.housekeeping_cpus,
                    "Host CPUs kept for the host (cpulist): templates are placed without them, as the daemon would");
  check->add_option("--template-dir", template_dirs, "Operator template directories, over the shipped templates");
  check->add_flag("--json", check_args.json, "Print the checks as JSON");
  check
      ->add_option("--connect", check_args.connect,
                   "The libvirt whose libvirt and QEMU versions the templates are held against (live host only)")
      ->capture_default_str();

  if (const auto exit_code = hostagent::program_support::parse_command_line(app, argc, argv)) return *exit_code;
  if (const auto status = api_commands.run(std::cout, std::cerr)) return *status;

  std::vector<std::filesystem::path> dirs(template_dirs.begin(), template_dirs.end());
  dirs.push_back(hostagent::program_support::shipped_template_dir());
  if (topology->parsed()) return run_topology(topology_source, as_json);
  if (render->parsed()) {
    render_args.template_dirs = dirs;
    return hostagent::ctl::run_render(render_args, std::cout, std::cerr);
  }
  if (verify->parsed()) {
    verify_args.render.template_dirs = dirs;
    return hostagent::ctl::run_verify_guest(verify_args, std::cout, std::cerr);
  }
  fleet_args.template_dirs = dirs;
  if (candidates->parsed()) return hostagent::ctl::run_fleet_candidates(fleet_args, std::cout, std::cerr);
  if (fleet_create->parsed()) return hostagent::ctl::run_fleet_create(fleet_args, std::cout, std::cerr);
  if (validate->parsed()) return hostagent::ctl::run_template_validate(validate_files, dirs, std::cout, std::cerr);
  if (check->parsed()) {
    check_args.template_dirs.push_back(hostagent::program_support::shipped_template_dir());
    check_args.template_dirs.insert(check_args.template_dirs.end(), template_dirs.begin(), template_dirs.end());
    return hostagent::ctl::run_host_check(check_args, std::cout, std::cerr);
  }
  return 0;
}

}  // namespace

// Every answer is checked into its shape before it is read (api_commands, progress, the fleet's
// placement_answers), so nothing below should throw; whatever still does is a defect, said as one
// with exit status 70 (EX_SOFTWARE), never an abort and a core. The tests hold every command to
// exit 0 or 1 on any answer, so this never hides one.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& thrown) {
    std::cerr << "hostagentctl: internal: " << hostagent::ctl::terminal_text(thrown.what())
              << " (a defect of hostagentctl: please report it)\n";
    return 70;
  }
}
