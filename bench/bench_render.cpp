// Placement plus rendering of the largest shipped shape (gx3d-160x1792x8h100) on the largest simulated
// host (vela2): the work `hostagentctl render` and a create do between reading the host and calling
// libvirt. Baseline, measured in the same run: pugixml parsing the rendered domain back, i.e. what
// one read of the document costs, so the ratio says how many such reads producing it is worth.
#include <pugixml.hpp>

#include "bench_support.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/vmtemplates/shape_request.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

int main(int argc, char** argv) {
  using namespace hostagent;
  const int runs = argc > 1 ? std::atoi(argv[1]) : 15;
  const auto shape = vmtemplates::load_template_file(
      std::filesystem::path(HOSTAGENT_SOURCE_DIR) / "vmtemplates/templates/gx3d-160x1792x8h100.yaml", {});
  if (!shape.ok()) bench::fail("bench_render", shape.error().message);
  const auto host = bench::discover_builtin("vela2");
  const numa::HostPolicy policy{{0, 1, 2, 3, 96, 97, 98, 99}, true, {}, {}, {}, {}};
  const auto request = placement_request(*shape);
  render::GuestOptions options;
  options.name = "train-0";

  std::string domain;
  const double place_only = bench::median_us(runs, 20, [&] {
    if (!numa::place(host, {}, policy, request).ok()) bench::fail("bench_render", "placement failed");
  });
  const double place_and_render = bench::median_us(runs, 20, [&] {
    const auto placement = numa::place(host, {}, policy, request);
    const auto guest = render::render_guest(host, *shape, *placement, options);
    if (!guest.ok()) bench::fail("bench_render", guest.error().message);
    domain = guest->domain_xml;
  });
  const double parse = bench::median_us(runs, 20, [&] {
    pugi::xml_document doc;
    if (!doc.load_string(domain.c_str())) bench::fail("bench_render", "rendered domain does not parse");
  });

  std::printf("placement + render of gx3d-160x1792x8h100 on simulated vela2 (%zu bytes of domain XML), median of %d\n",
              domain.size(), runs);
  std::printf("  %-40s %9.1f us\n", "place()", place_only);
  std::printf("  %-40s %9.1f us\n", "place() + render_guest()", place_and_render);
  std::printf("  %-40s %9.1f us\n", "baseline: pugixml parse of that domain", parse);
  std::printf("  ratio place+render / parse = %.1f\n", place_and_render / parse);
  return 0;
}
