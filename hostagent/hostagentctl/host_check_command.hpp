// hostagentctl host check: the host's prerequisites for starting VMs (hostcheck), read from this
// host's kernel without a daemon, as a table (or JSON) of pass, warn and fail with the fix for each.
// Exit status 1 when any check fails: a deploy pipeline can gate a host on it.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "host_source.hpp"
#include "hostagent/hostcheck/host_check.hpp"

namespace hostagent::ctl {

struct HostCheckArgs {
  HostSource host;
  std::string housekeeping_cpus;                     // cpulist, "" for none: templates are placed as the daemon would
  std::vector<std::filesystem::path> template_dirs;  // later ones override earlier ones
  bool json = false;
  // The libvirt whose versions the templates are held against, on the live host only (a sysfs
  // tree or a simulated host has no libvirtd of its own).
  std::string connect = "qemu:///system";
};

// The checks as a table: CHECK, RESULT, FOUND, and the fixes of those that did not pass below it.
std::string render_checks(const std::vector<hostcheck::Check>& checks);

int run_host_check(const HostCheckArgs& args, std::ostream& out, std::ostream& err);

}  // namespace hostagent::ctl
