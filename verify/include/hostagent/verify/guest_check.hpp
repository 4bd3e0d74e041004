// verify/guest_check: holds what a booted guest saw against what the host has and what
// was placed and rendered. Pure: no I/O, so every rule is tested on views written by hand.
//
// The rules (each broken one is a finding naming the device, the host and guest addresses and both
// sides' values):
//  - every placed device's stand-in is at its rendered guest address;
//  - it is on the guest NUMA node of its cell, and that cell is the one numa::guest_cell_for gives its
//    host node: the cell mirroring that node, or, for a node without a cell of its own, the nearest
//    (listed in `mapped`);
//  - for every pair of placed GPUs, NIC VFs and NVMe drives, the guest's code (numa::affinity: PIX,
//    PXB, PHB, NODE, SYS) is the host's, with each device on the node its cell mirrors (so a device
//    of a cell-less node is NODE, not SYS, to its cell's devices): a GPU and a NIC share their nearest switch in the
//    guest exactly when they do on the host, a farther switch likewise, and a host bridge likewise;
//  - the guest's NUMA nodes are the stand-in's cells, with their vCPUs and (most of) their memory, and
//    the rendered domain's cells hold the placed vCPUs, pinned on their cell's host node, and the
//    placed memory;
//  - every bus ID in the rendered NCCL topology file is a function of the guest, a bridge where the
//    file nests devices under it, the devices below it in the guest too, on the file's NUMA node;
//  - the guest's NUMA distances are the rendered cells' and the host's between the cells' nodes
//    (two cells of one host node: 11, as render gives them);
//  - the seed's vendor-data ran in the guest and put every file render::guest_files names,
//    byte for byte (SHA-256), so the bus ids checked above are the ones the guest's NCCL reads;
//  - each placed GPU's and NIC's link: the narrowest of the guest ports above it against the
//    host's link. Narrower in the guest is a note when the NCCL file states the host's link for
//    that device (NCCL takes the file's link_speed and link_width over sysfs), else a finding;
//  - the 64-bit hole the stand-in gives pcie-root: the guest's host bridge windows above 4 GiB
//    span it.
#pragma once

#include <string>
#include <vector>

#include "hostagent/numa/affinity.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/verify/guest_view.hpp"
#include "hostagent/verify/stand_in.hpp"

namespace hostagent::verify {

struct CheckInputs {
  const numa::HostModel& host;
  const numa::Placement& placement;
  const render::RenderedGuest& rendered;
  const StandIn& stand_in;
  // Why the guest could not read its seed (the probe lacks the kernel's modules for it): the
  // delivered NCCL files are then reported unread, as a note; "" when the stand-in had the seed.
  std::string seed_unread = {};
};

// A relation matrix over the placed devices, in `labels` order ("GPU0", "NIC0", "NVME0": by role,
// then host address).
struct AffinityMatrix {
  std::vector<std::string> labels;
  std::vector<std::vector<numa::Affinity>> relation;  // [row][column]
};

struct MatrixDevice {
  std::string label;
  PciAddress host;
  PciAddress guest;
  int guest_cell = 0;
};

struct GuestCheck {
  std::vector<std::string> findings;  // empty: the guest sees the host's topology
  std::vector<std::string> notes;     // differences the NCCL topology file corrects, a seed unread
  std::vector<std::string> mapped;    // each device whose host node has no guest cell, and its cell
  std::vector<std::string> links;     // per placed GPU and NIC: its link on the host and in the guest
  std::vector<std::string> held;      // what the guest shows of the stand-in's ties (its 64-bit hole)
  std::vector<MatrixDevice> devices;  // the matrices' rows, in order
  AffinityMatrix host;
  // The host's, with each device on the node its guest cell mirrors (numa::guest_cell_for): what the
  // guest must show. It differs from the host's only for a device whose node has no guest cell.
  AffinityMatrix expected;
  AffinityMatrix guest;
  bool ok() const { return findings.empty(); }
};

GuestCheck check_guest(const CheckInputs& inputs, const GuestView& view);

// The host and guest matrices side by side, each cell "SW", "NODE", "SYS" (a differing cell is
// marked with '*' on the guest side), then a legend: label, host address, guest address, cell.
std::string format_matrices(const GuestCheck& check);

}  // namespace hostagent::verify
