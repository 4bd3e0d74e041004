// render/domain_xml: the libvirt domain XML of a guest (libvirt >= 9, QEMU/KVM, q35). domain_xml.cpp
// writes the domain-wide parts (identity, metadata, memory, CPUs, NUMA); domain_devices.cpp the
// devices, the PCI controllers of the layout and the QEMU overrides.
#pragma once

#include <pugixml.hpp>

#include <string>
#include <vector>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "mmio_window.hpp"
#include "pci_layout.hpp"

namespace hostagent::render::detail {

inline constexpr const char* kQemuNamespace = "http://libvirt.org/schemas/domain/qemu/1.0";
inline constexpr const char* kHostagentNamespace = "https://hostagent.dev/xmlns/domain/1";

// Everything the domain is rendered from, already checked (input_checks, placement_checks,
// build_pci_layout, vf_macs).
struct DomainInputs {
  const numa::HostModel& host;
  const vmtemplates::VmTemplate& shape;
  const numa::Placement& placement;
  const GuestOptions& options;
  const PciLayout& layout;
  const std::vector<MacAddress>& vf_macs;  // indexed by a NIC Device's ordinal
  MmioWindow mmio;
};

std::string render_domain_xml(const DomainInputs& in);

// The peer-to-peer clique property is set on NVIDIA GPUs only: QEMU's vfio-pci refuses
// x-nv-gpudirect-clique on any other vendor (hw/vfio/pci-quirks.c).
bool takes_clique(const Device& device);

// domain_devices.cpp
void append_devices(pugi::xml_node domain, const DomainInputs& in);
void append_qemu_override(pugi::xml_node domain, const DomainInputs& in);

}  // namespace hostagent::render::detail
