// hostagentctl fleet: the control plane's side of a fleet in OpenStack Placement (docs/placement.md).
//   fleet candidates: a template as one allocation-candidates request, and what Placement offers;
//   fleet create: a candidate picked, claimed in Placement (consumer = the new VM's UUID), and the
//   create sent to that host's hostagentd with the claim, so that the host gives exactly that.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace hostagent::ctl {

struct FleetArgs {
  std::string placement_url;
  std::string placement_token_file;  // "" : the token "admin" (a noauth2 Placement)
  std::string template_ref;          // a file, or a template's name in template_dirs
  std::vector<std::filesystem::path> template_dirs;
  int gpus_per_node = 4;
  int max_slots = 16;
  int limit = 50;
  bool json = false;
  // create
  std::string name;
  std::string host_url = "unix:/run/hostagent/hostagent.sock";  // "{host}" becomes the root provider's name
  std::string host_token_file;
  std::string boot_image;  // the create's boot_image on the host; "" the template's
  int attempts = 5;
  double timeout_seconds = 600;  // for the create, once sent
};

int run_fleet_candidates(const FleetArgs& args, std::ostream& out, std::ostream& err);
int run_fleet_create(const FleetArgs& args, std::ostream& out, std::ostream& err);

}  // namespace hostagent::ctl
