#include "verify_command.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ostream>

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/text_file.hpp"
#include "hostagent/verify/verify_guest.hpp"
#include "table.hpp"

namespace hostagent::ctl {
namespace {

namespace fs = std::filesystem;

// The stand-in's directory: QEMU runs as libvirt's QEMU user and opens the kernel, the initramfs and
// the console log in it, so it must be enterable by others (mkdtemp makes 0700).
Result<fs::path> make_work_dir(const std::optional<std::string>& requested) {
  fs::path dir;
  std::error_code ec;
  if (requested) {
    dir = fs::absolute(*requested, ec);
    fs::create_directories(dir, ec);
    if (ec) return errno_error(ec.value(), "create directory", dir.string());
  } else {
    std::string pattern = "/var/tmp/hostagent-verify-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return errno_error(errno, "create directory", pattern);
    dir = pattern;
  }
  fs::permissions(dir, fs::perms(0755), ec);
  if (ec) return errno_error(ec.value(), "chmod", dir.string());
  return dir;
}

std::string summary_of(const PlacedGuest& placed) {
  int gpus = 0, nics = 0, nvme = 0, nvswitches = 0;
  for (const auto& a : placed.rendered.addresses) {
    gpus += a.role == "gpu" ? 1 : 0;
    nics += a.role == "nic" ? 1 : 0;
    nvme += a.role == "nvme" ? 1 : 0;
    nvswitches += a.role == "nvswitch" ? 1 : 0;
  }
  const auto whole = static_cast<int>(placed.placement.whole_nics.size());
  const std::string nic_text =
      whole > 0 ? std::to_string(whole) + " whole NIC(s)" : std::to_string(nics) + " NIC VF(s)";
  return std::to_string(gpus) + " GPU(s), " + nic_text + ", " + std::to_string(nvme) + " NVMe" +
         (nvswitches > 0 ? ", " + std::to_string(nvswitches) + " NVSwitch(es)" : "") + " in " +
         std::to_string(placed.placement.cells.size()) + " guest cell(s)";
}

// auto: the template's page size when this machine has room for the stand-in in it, else the
// largest size that has, else none.
Result<uint64_t> hugepage_kib(const VerifyArgs& args, const PlacedGuest& placed) {
  if (args.hugepages == "none") return uint64_t{0};
  if (args.hugepages == "2M") return uint64_t{2048};
  if (args.hugepages == "1G") return uint64_t{1024ULL * 1024};
  HA_TRY(const auto machine, SysfsRoot::open("/"));
  const uint64_t total_kib = static_cast<uint64_t>(args.memory_per_cell_mib) * 1024 * placed.placement.cells.size();
  HA_TRY(const auto size, verify::hugepage_size_with_room(machine, placed.shape.hugepage_size_bytes / 1024, total_kib));
  return size.value_or(0);
}

// TCG's width (stand_in.hpp); under KVM the guest takes this machine's CPU's ("address sizes : 46
// bits physical" in /proc/cpuinfo, which KVM's guests get by default).
int phys_address_bits(const std::string& domain_type) {
  if (domain_type != "kvm") return verify::kTcgPhysAddressBits;
  const auto cpuinfo = read_text_file("/proc/cpuinfo");
  if (!cpuinfo.ok()) return verify::kTcgPhysAddressBits;
  const auto at = cpuinfo->find("address sizes\t: ");
  return at == std::string::npos ? verify::kTcgPhysAddressBits : std::atoi(cpuinfo->c_str() + at + 16);
}

Result<verify::VerifyRequest> request_of(const VerifyArgs& args, const PlacedGuest& placed, const fs::path& work_dir) {
  verify::StandInOptions stand_in;
  stand_in.domain_type = args.domain_type;
  stand_in.vcpus_per_cell = args.vcpus_per_cell;
  stand_in.memory_per_cell_kib = static_cast<uint64_t>(args.memory_per_cell_mib) * 1024;
  stand_in.firmware = args.firmware == "template" ? "" : args.firmware;
  HA_TRY(stand_in.hugepage_kib, hugepage_kib(args, placed));
  HA_TRY(const auto machine, SysfsRoot::open("/"));
  HA_TRY(stand_in.machine, verify::read_machine(machine, phys_address_bits(args.domain_type)));
  return verify::VerifyRequest{.host = placed.host,
                               .placement = placed.placement,
                               .rendered = placed.rendered,
                               .domain_name = args.render.name,
                               .work_dir = work_dir,
                               .image = {.kernel = args.kernel, .busybox = args.busybox},
                               .stand_in = stand_in,
                               .timeout = std::chrono::seconds(args.timeout_s)};
}

// What the running stand-in holds of the rendered domain's ties, moved onto this machine: read
// from its QEMU process (pins, memory binding) and from the guest (the 64-bit hole).
void print_ties(const verify::VerifyReport& report, std::ostream& out) {
  if (report.ties.held.empty() && report.check.held.empty() && report.ties.unread.empty()) return;
  out << "Ties held (the running QEMU process and the guest):\n";
  for (const auto& line : report.ties.held) out << "  " << line << "\n";
  for (const auto& line : report.check.held) out << "  " << line << "\n";
  for (const auto& line : report.ties.unread) out << "  not read back: " << line << "\n";
  out << "\n";
}

void print_report(const verify::VerifyReport& report, std::ostream& out) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(report.start_to_power_off.count()) / 1000.0);
  out << "guest powered off " << seconds << " s after its start (start to power-off)\n\n"
      << verify::format_matrices(report.check) << "\n";
  if (!report.check.links.empty()) {
    out << "Links (host, narrowest guest port above the device):\n";
    for (const auto& line : report.check.links) out << "  " << line << "\n";
    out << "\n";
  }
  print_ties(report, out);
  for (const auto& line : report.check.mapped) out << "mapped: " << line << "\n";
  if (report.ok()) {
    out << "MATCH: the guest sees the host's topology: " << report.check.devices.size() << " devices, "
        << report.view.nodes.size() << " NUMA node(s) and their distances, NCCL bus IDs and links, "
        << (report.view.delivered.empty() ? "" : "the seed's files as rendered, ") << "cells as rendered"
        << (report.ties.held.empty() ? "" : ", its pinning and memory binding in the running QEMU");
    if (!report.check.notes.empty()) out << " (" << report.check.notes.size() << " link(s) corrected by the NCCL file)";
    out << "\n";
    return;
  }
  for (const auto& note : report.check.notes) out << "note: " << note << "\n";
  const auto count = report.check.findings.size() + report.ties.findings.size();
  out << "MISMATCH: " << count << " difference(s) between the guest and the host:\n";
  for (const auto& finding : report.check.findings) out << "  - " << finding << "\n";
  for (const auto& finding : report.ties.findings) out << "  - " << finding << "\n";
}

int fail(const Error& error, std::ostream& err) {
  return print_failure(err, error);
}

}  // namespace

int run_verify_guest(const VerifyArgs& args, std::ostream& out, std::ostream& err) {
  VerifyArgs run = args;
  run.render.name = args.name.value_or("hostagent-verify-" + std::to_string(getpid()));
  const auto placed = place_and_render(run.render, err);
  if (!placed.ok()) return fail(placed.error(), err);
  out << "verify-guest: " << placed->shape.name << " on " << placed->host.source << ": " << summary_of(*placed) << "\n";
  auto hypervisor = virt::connect_libvirt(virt::LibvirtOptions{run.connect, "", std::chrono::seconds(30)});
  if (!hypervisor.ok()) return fail(hypervisor.error(), err);
  const auto work_dir = make_work_dir(run.work_dir);
  if (!work_dir.ok()) return fail(work_dir.error(), err);
  const auto request = request_of(run, *placed, *work_dir);
  if (!request.ok()) return fail(request.error(), err);
  out << "booting the stand-in " << run.render.name << " through " << run.connect << " (work directory "
      << work_dir->string() << ")\n";
  const auto report = verify::verify_guest(**hypervisor, *request);
  if (!report.ok()) {
    err << "hostagentctl: the work directory is kept: " << work_dir->string() << "\n";
    return fail(report.error(), err);
  }
  for (const auto& change : report->stand_in.changes) out << "stand-in: " << change << "\n";
  print_report(*report, out);
  if (!report->ok() || run.keep) {
    out << "work directory kept: " << work_dir->string() << " (console.log, vmlinuz, initramfs.cpio)\n";
  } else {
    std::error_code ec;
    fs::remove_all(*work_dir, ec);
  }
  return report->ok() ? 0 : 1;
}

}  // namespace hostagent::ctl
