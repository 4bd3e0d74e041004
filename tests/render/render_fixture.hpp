// Fixtures for the render tests: simulated hosts discovered from sysfs (vela1 with SR-IOV VFs
// enabled, which it ships without), placements and templates built by hand from them, and XML
// helpers, among them an independent model of how guest firmware numbers the PCI buses.
#pragma once

#include <pugixml.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "test_support.hpp"

namespace hostagent::render::testing {

using namespace hostagent::testing;

constexpr uint64_t GiB = 1ULL << 30;

struct Host {
  numa::HostModel model;  // discovered from its shared tree (tests/support/simulated_hosts.hpp)
};

// A built-in simulated host; `vfs_per_pf` > 0 enables that many VFs on every SR-IOV PF that has
// none enabled. Discovered once per test run (discovery takes seconds; the model is a value).
std::shared_ptr<const Host> discover(const std::string& name, int vfs_per_pf = 0);
// The same, discovered afresh into a new scratch tree.
std::unique_ptr<Host> discover_uncached(const std::string& name, int vfs_per_pf = 0);

// What to place, by hand: one guest cell per entry of host_nodes.
struct Want {
  std::vector<int> host_nodes;
  int vcpus_per_cell = 8;
  bool smt = true;  // vCPU pairs on the two threads of one host core
  uint64_t memory_per_cell = 16 * GiB;
  uint64_t page_size = GiB;
  int gpus_per_cell = 0;  // the node's GPUs in host address order
  int vfs_per_gpu = 0;    // from the NIC under the GPU's switch, PFs taken in turn
  int extra_vfs = 0;      // spread over the cells in turn, first free VF of the cell's node
  int nvme = 0;           // likewise
  std::vector<int> housekeeping{0, 1};
};
numa::Placement make_placement(const numa::HostModel& host, const Want& want);

// A template matching a placement built from `want`.
vmtemplates::VmTemplate make_shape(const std::string& name, const Want& want);

GuestOptions options(const std::string& name);

// Renders and REQUIREs success.
RenderedGuest render_ok(const numa::HostModel& host, const vmtemplates::VmTemplate& shape,
                        const numa::Placement& placement, const GuestOptions& opts);

std::unique_ptr<pugi::xml_document> parse(const std::string& xml);

// Runs virt-xml-validate on the text; nullopt when the tool is not installed.
std::optional<CommandResult> virt_xml_validate(const std::string& xml);

// Where each hostdev/interface of a domain lands in the guest, worked out the way OVMF and SeaBIOS
// number buses: each pcie-expander-bus root bus is its busNr, bridges below get numbers depth-first
// in slot order. Keyed by host address.
struct GuestView {
  std::map<numa::PciAddress, numa::PciAddress> guest;  // host -> guest address
  std::map<numa::PciAddress, int> port;                // host -> controller it plugs into
  std::map<numa::PciAddress, int> upstream;            // host -> upstream port controller, -1 none
  std::map<int, numa::PciAddress> controller_guest;    // controller index -> its own guest address
  std::map<int, int> controller_cell;                  // controller index -> pxb <node> above it
  std::map<int, int> controller_expander;              // controller index -> the pxb above it (index)
};
GuestView guest_view(const pugi::xml_document& domain);

// A named scenario: host, template, hand-built placement and options, ready to render.
struct Case {
  std::string name;
  std::string host_name;
  int vfs_per_pf = 0;
  std::shared_ptr<const Host> host;
  Want want;
  vmtemplates::VmTemplate shape;
  numa::Placement placement;
  GuestOptions opts;
};
// vela1-8gpu, vela2-8gpu, vela2-2gpu, vela1-nodevice, vela1-gx2-80x1280x8a100, quirks-3gpu,
// vela1-kernel-boot, vela1-cloud-init.
std::vector<std::string> case_names();
Case make_case(const std::string& name);

numa::PciAddress pci(const std::string& text);
uint64_t attr_u64(const pugi::xml_node& node, const char* name);

}  // namespace hostagent::render::testing
