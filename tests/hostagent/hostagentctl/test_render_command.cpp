// Every shipped template on every simulated host, end to end through the real pieces: template
// loading, discovery, placement, rendering. Golden files hold the domain, the placement and the NCCL
// topology, or the reason the shape does not fit; every rendered domain passes virt-xml-validate.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <fstream>

#include "hostagent/api/host_json.hpp"
#include "hostagent/api/placement_json.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "hostagent/vmtemplates/shape_request.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "render_command.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::ctl {
namespace {

namespace fs = std::filesystem;

void check_validates(const std::string& domain_xml, const testing::TempDir& dir) {
  const auto validator = testing::find_program("virt-xml-validate");
  if (!validator) {
    testing::skip("virt-xml-validate not on PATH (package libvirt-clients)");
    return;
  }
  const auto file = dir.path() / "domain.xml";
  std::ofstream(file) << domain_xml;
  const auto run = testing::run_command({validator->string(), file.string(), "domain"});
  CHECK_MESSAGE(run.exit_code == 0, run.output);
}

void check_golden(const std::string& name, const std::string& text) {
  const auto diff = testing::compare_golden(name, text);
  CHECK_MESSAGE(diff.empty(), diff);
}

TEST_CASE("every shipped template on every simulated host: golden placement, domain and NCCL topology") {
  const auto shapes = vmtemplates::load_template_dirs({testing::shipped_templates_dir()});
  REQUIRE_MESSAGE(shapes.ok(), shapes.error().message);
  REQUIRE(shapes->size() >= 5);
  const testing::TempDir dir;  // the domains handed to virt-xml-validate
  for (const auto& host_name : simhost::builtin_host_names()) {
    const auto host = testing::discover_shared(host_name);
    for (const auto& entry : *shapes) {
      // Named copies: doctest's CAPTURE is a lambda, and clang 14 cannot capture structured bindings.
      const std::string& name = entry.first;
      const vmtemplates::VmTemplate& shape = entry.second;
      CAPTURE(host_name);
      CAPTURE(name);
      const std::string prefix = "shapes/" + host_name + "/" + name;
      const auto placement = numa::place(host, {}, numa::HostPolicy{}, placement_request(shape));
      if (!placement.ok()) {
        CHECK(placement.error().code == ErrorCode::does_not_fit);
        check_golden(prefix + ".error.txt", placement.error().message + "\n");
        continue;
      }
      render::GuestOptions options;
      options.name = name;
      const auto guest = render::render_guest(host, shape, *placement, options);
      REQUIRE_MESSAGE(guest.ok(), guest.error().message);
      check_golden(prefix + ".domain.xml", guest->domain_xml);
      check_golden(prefix + ".nccl-topology.xml", guest->nccl_topology_xml);
      check_golden(prefix + ".placement.json", api::to_pretty_json(api::to_json(*placement)));
      check_validates(guest->domain_xml, dir);
    }
  }
}

std::string ctl() {
  const char* dir = std::getenv("HOSTAGENT_BINARY_DIR");
  REQUIRE_MESSAGE(dir != nullptr, "HOSTAGENT_BINARY_DIR is set by CTest");
  return (fs::path(dir) / "hostagent" / "hostagentctl").string();
}

TEST_CASE("hostagentctl render writes domain.xml, placement.json and nccl-topology.xml") {
  testing::TempDir out;
  const auto run = testing::run_command({ctl(), "render", "--template", "gx3d-160x1792x8h100", "--simulated", "vela2",
                                         "--name", "train-0", "--housekeeping-cpus", "0-7,48-55,96-103,144-151",
                                         "--output-dir", out.path().string()});
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  for (const char* file : {"domain.xml", "placement.json", "nccl-topology.xml"}) {
    CAPTURE(file);
    CHECK(fs::file_size(out.path() / file) > 0);
  }
  const auto placement = boost::json::parse(testing::read_text_file(out.path() / "placement.json"));
  CHECK(placement.at("template").as_string() == "gx3d-160x1792x8h100");
  CHECK(placement.at("emulator_cpus").as_string() == "0-7,48-55,96-103,144-151");
  CHECK(placement.at("gpus").as_array().size() == 8);
  CHECK(placement.at("guest_addresses").as_array().size() >= 24);  // 8 GPUs, 8 VFs, 8 NVMe
  check_validates(testing::read_text_file(out.path() / "domain.xml"), out);

  const auto printed =
      testing::run_command({ctl(), "render", "--template", "gx3-16x128x1h100", "--simulated", "vela2"});
  REQUIRE_MESSAGE(printed.exit_code == 0, printed.output);
  CHECK(printed.output.find("<domain type='kvm'") != std::string::npos);
}

TEST_CASE("hostagentctl render explains a shape that does not fit, and a template that does not exist") {
  const auto h100_on_a100 =
      testing::run_command({ctl(), "render", "--template", "gx3d-160x1792x8h100", "--simulated", "vela1"});
  CHECK(h100_on_a100.exit_code == 1);
  CHECK(h100_on_a100.output.find("does_not_fit") != std::string::npos);
  const auto missing = testing::run_command({ctl(), "render", "--template", "no-such-shape", "--simulated", "vela1"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("no-such-shape") != std::string::npos);
}

TEST_CASE("hostagentctl render from an hwloc export: the DGX-2's 16 V100") {
  const auto data = testing::reference_data_or_skip();
  if (!data) return;
  testing::TempDir dir;
  const auto shape = dir.path() / "dgx2-16.yaml";
  std::ofstream(shape) << "name: dgx2-16\nvcpus: 4\nmemory: 64GiB\nhugepage_size: 1G\ngpus: {count: 16, model: V100}\n";
  const auto run = testing::run_command({ctl(), "render", "--template", shape.string(), "--hwloc-xml",
                                         (*data / "hwloc/nvidiaDGX2.xml").string(), "--output-dir",
                                         (dir.path() / "out").string(), "--name", "dgx2"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  CHECK(run.output.find("free hugepages are not checked") != std::string::npos);
  check_validates(testing::read_text_file(dir.path() / "out/domain.xml"), dir);
}

}  // namespace
}  // namespace hostagent::ctl
