// hostagentctl verify-guest: renders a template for a host, boots a stand-in of the domain through
// libvirt (verify/) and shows whether the guest sees the host's topology: host and guest
// affinity matrices side by side, then every difference. Exit status 0 when the guest matches.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "render_command.hpp"

namespace hostagent::ctl {

struct VerifyArgs {
  RenderArgs render;                // template, host, template dirs, housekeeping CPUs
  std::optional<std::string> name;  // the stand-in domain's; default hostagent-verify-PID
  std::string connect = "qemu:///system";
  std::string kernel;  // "" : the newest /boot/vmlinuz-*
  std::string busybox = "/bin/busybox";
  std::string firmware = "template";  // template | bios | efi
  std::string domain_type = "qemu";   // qemu (TCG) | kvm
  int vcpus_per_cell = 1;
  int memory_per_cell_mib = 256;
  std::string hugepages = "auto";  // auto | none | 2M | 1G
  int timeout_s = 300;
  std::optional<std::string> work_dir;  // default: a new directory under /var/tmp
  bool keep = false;                    // keep the work directory after a match too
};

int run_verify_guest(const VerifyArgs& args, std::ostream& out, std::ostream& err);

}  // namespace hostagent::ctl
