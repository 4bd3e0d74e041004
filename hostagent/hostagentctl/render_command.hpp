// hostagentctl render: template + host -> placement -> domain XML, placement.json and the guest's
// NCCL topology file, without a daemon. What an infra engineer runs to see what a shape becomes.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "host_source.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::ctl {

struct RenderArgs {
  std::string template_ref;  // a file, or the name of a template in template_dirs
  HostSource host;
  std::string name = "vm0";
  std::optional<std::string> output_dir;
  std::string domain_type = "kvm";
  std::string housekeeping_cpus;  // cpulist, "" for none
  std::vector<std::filesystem::path> template_dirs;
};

// A template placed on a host and rendered: what `render` writes and `verify-guest` boots.
struct PlacedGuest {
  numa::HostModel host;
  vmtemplates::VmTemplate shape;
  numa::Placement placement;
  render::RenderedGuest rendered;
};

// A template by file, or by name in template_dirs (the first that has NAME.yaml); not an abstract one.
Result<vmtemplates::VmTemplate> load_shape(const std::string& ref,
                                           const std::vector<std::filesystem::path>& template_dirs);

// Loads the template (a file, or a name in template_dirs) and the host, places and renders. Notes
// for the operator (what an hwloc capture cannot tell) go to err.
Result<PlacedGuest> place_and_render(const RenderArgs& args, std::ostream& err);

int run_render(const RenderArgs& args, std::ostream& out, std::ostream& err);

}  // namespace hostagent::ctl
