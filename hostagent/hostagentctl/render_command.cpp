#include "render_command.hpp"

#include <fstream>
#include <ostream>

#include "hostagent/api/host_json.hpp"
#include "hostagent/api/placement_json.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/text_file.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/vmtemplates/shape_request.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "table.hpp"

namespace hostagent::ctl {
namespace {

namespace fs = std::filesystem;

Result<vmtemplates::VmTemplate> load_file(const fs::path& file, const std::vector<fs::path>& template_dirs) {
  HA_TRY(auto shape, vmtemplates::load_template_file(file, template_dirs));
  if (shape.abstract) {
    return Error{ErrorCode::invalid_argument, "template " + text::quoted(shape.name) + " (" + file.string() +
                                                  ") is abstract: a base for others to extend, not a shape to place"};
  }
  return shape;
}

boost::json::value placement_document(const numa::Placement& placement, const render::RenderedGuest& guest,
                                      const std::string& template_name) {
  auto doc = api::to_json(placement);
  boost::json::array addresses;
  for (const auto& a : guest.addresses) {
    addresses.emplace_back(boost::json::object{
        {"host", a.host.to_string()}, {"guest", a.guest.to_string()}, {"role", a.role}, {"guest_cell", a.guest_cell}});
  }
  doc.as_object()["template"] = template_name;
  doc.as_object()["guest_addresses"] = std::move(addresses);
  return doc;
}

Status write_outputs(const fs::path& dir, const numa::Placement& placement, const render::RenderedGuest& guest,
                     const std::string& template_name) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return errno_error(ec.value(), "create directory", dir.string());
  HA_TRY_STATUS(write_text_file(dir / "domain.xml", guest.domain_xml));
  HA_TRY_STATUS(write_text_file(dir / "nccl-topology.xml", guest.nccl_topology_xml));
  return write_text_file(dir / "placement.json",
                         api::to_pretty_json(placement_document(placement, guest, template_name)));
}

}  // namespace

Result<vmtemplates::VmTemplate> load_shape(const std::string& ref, const std::vector<fs::path>& template_dirs) {
  std::error_code ec;
  if (fs::is_regular_file(ref, ec)) return load_file(ref, template_dirs);
  for (const auto& dir : template_dirs) {
    const auto file = dir / (ref + ".yaml");
    if (fs::is_regular_file(file, ec)) return load_file(file, template_dirs);
  }
  std::string searched;
  for (const auto& dir : template_dirs) searched += (searched.empty() ? "" : ", ") + dir.string();
  return Error{ErrorCode::not_found, "template " + text::quoted(ref) + " is neither a file nor a template in " +
                                         (searched.empty() ? std::string("any template directory") : searched)};
}

Result<PlacedGuest> place_and_render(const RenderArgs& args, std::ostream& err) {
  PlacedGuest out;
  HA_TRY(out.shape, load_shape(args.template_ref, args.template_dirs));
  HA_TRY(out.host, load_host(args.host));
  numa::HostPolicy policy;
  HA_TRY(policy.housekeeping_cpus, parse_cpu_list(args.housekeeping_cpus));
  // An hwloc export records reserved hugepages but not how many are free.
  policy.check_hugepages = !args.host.hwloc_xml.has_value();
  if (!policy.check_hugepages)
    err << "hostagentctl: note: free hugepages are not checked: an hwloc XML does not record them\n";
  HA_TRY(out.placement, numa::place(out.host, {}, policy, placement_request(out.shape)));
  render::GuestOptions options;
  options.name = args.name;
  options.domain_type = args.domain_type;
  HA_TRY(out.rendered, render::render_guest(out.host, out.shape, out.placement, options));
  return out;
}

int run_render(const RenderArgs& args, std::ostream& out, std::ostream& err) {
  const auto fail = [&](const Error& error) { return print_failure(err, error); };
  const auto placed = place_and_render(args, err);
  if (!placed.ok()) return fail(placed.error());
  if (!args.output_dir) {
    out << placed->rendered.domain_xml;
    return 0;
  }
  const auto written = write_outputs(*args.output_dir, placed->placement, placed->rendered, placed->shape.name);
  if (!written.ok()) return fail(written.error());
  out << "wrote " << *args.output_dir << "/{domain.xml,placement.json,nccl-topology.xml}\n";
  return 0;
}

}  // namespace hostagent::ctl
