// Golden domain XML and NCCL topology for every scenario, schema validation of every rendered domain
// with libvirt's own virt-xml-validate, and the stability of the output.
#include <doctest/doctest.h>

#include "render_fixture.hpp"

namespace hostagent::render::testing {
namespace {

TEST_CASE("golden domain XML and NCCL topology for every scenario") {
  for (const auto& name : case_names()) {
    CAPTURE(name);
    const auto c = make_case(name);
    const auto guest = render_ok(c.host->model, c.shape, c.placement, c.opts);
    const auto domain_diff = compare_golden("render/" + name + ".domain.xml", guest.domain_xml);
    CHECK_MESSAGE(domain_diff.empty(), domain_diff);
    const auto nccl_diff = compare_golden("render/" + name + ".nccl-topology.xml", guest.nccl_topology_xml);
    CHECK_MESSAGE(nccl_diff.empty(), nccl_diff);
  }
}

TEST_CASE("every rendered domain passes virt-xml-validate (libvirt's domain schema)") {
  if (!find_program("virt-xml-validate")) {
    skip("virt-xml-validate is not installed (package libvirt-clients)");
    return;
  }
  for (const auto& name : case_names()) {
    CAPTURE(name);
    const auto c = make_case(name);
    for (const char* type : {"kvm", "qemu", "test"}) {
      CAPTURE(type);
      auto opts = c.opts;
      opts.domain_type = type;
      const auto result = virt_xml_validate(render_ok(c.host->model, c.shape, c.placement, opts).domain_xml);
      REQUIRE(result.has_value());
      CHECK_MESSAGE(result->exit_code == 0, result->output);
    }
  }
}

TEST_CASE("rendering is stable: same inputs, same bytes and addresses") {
  for (const auto& name : case_names()) {
    CAPTURE(name);
    const auto c = make_case(name);
    const auto first = render_ok(c.host->model, c.shape, c.placement, c.opts);
    // A freshly discovered host (same model, new scratch tree) and a second render of everything.
    const auto fresh = discover_uncached(c.host_name, c.vfs_per_pf);
    const auto second = render_ok(fresh->model, c.shape, c.placement, c.opts);
    CHECK(render_ok(c.host->model, c.shape, c.placement, c.opts).domain_xml == first.domain_xml);
    CHECK(first.domain_xml == second.domain_xml);
    CHECK(first.nccl_topology_xml == second.nccl_topology_xml);
    REQUIRE(first.addresses.size() == second.addresses.size());
    for (std::size_t i = 0; i < first.addresses.size(); ++i) {
      CHECK(first.addresses[i].host == second.addresses[i].host);
      CHECK(first.addresses[i].guest == second.addresses[i].guest);
    }
  }
}

}  // namespace
}  // namespace hostagent::render::testing
