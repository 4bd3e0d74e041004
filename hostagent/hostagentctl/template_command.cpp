// hostagentctl template validate: the command's logic, apart from its CLI wiring so tests call it.
#include "template_command.hpp"

#include <cstdio>

namespace hostagent::ctl {
namespace {

std::string plural(int count, const std::string& one, const std::string& many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

std::string size_text(uint64_t bytes) {
  constexpr uint64_t kMiB = 1ULL << 20;
  constexpr uint64_t kGiB = 1ULL << 30;
  if (bytes != 0 && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + "GiB";
  if (bytes != 0 && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + "MiB";
  return std::to_string(bytes) + "B";
}

std::string gpu_text(const vmtemplates::GpuSpec& gpus) {
  if (!gpus.model.empty()) return plural(gpus.count, gpus.model + " GPU", gpus.model + " GPUs");
  if (gpus.ids.empty()) return plural(gpus.count, "GPU", "GPUs") + " (any NVIDIA)";
  std::string ids;
  for (const auto& id : gpus.ids) {
    char text[16];
    std::snprintf(text, sizeof(text), "%04x:%04x", id.vendor_id, id.device_id);
    ids += (ids.empty() ? "" : "|") + std::string(text);
  }
  return plural(gpus.count, "GPU", "GPUs") + " (" + ids + ")";
}

}  // namespace

std::string summarize_template(const vmtemplates::VmTemplate& shape) {
  if (shape.abstract) return shape.name + ", abstract: a base for extends";
  std::string text = shape.name + ", " + plural(shape.vcpus, "vCPU", "vCPUs") + ", " + size_text(shape.memory_bytes) +
                     " in " + (shape.hugepage_size_bytes == (2ULL << 20) ? "2M" : "1G") + " pages";
  if (!shape.guest_numa.mirror) text += ", " + plural(shape.guest_numa.cells, "NUMA cell", "NUMA cells");
  if (shape.gpus.count > 0) text += ", " + gpu_text(shape.gpus);
  if (shape.nics.vfs_per_gpu > 0) text += ", " + plural(shape.nics.vfs_per_gpu, "VF per GPU", "VFs per GPU");
  if (shape.nics.count > 0 && shape.nics.mode == vmtemplates::NicMode::pf) {
    text += ", " + plural(shape.nics.count, "whole NIC", "whole NICs");
  } else if (shape.nics.count > 0) {
    text += ", " + plural(shape.nics.count, "front-end VF", "front-end VFs");
  }
  if (shape.nvme > 0) text += ", " + std::to_string(shape.nvme) + " NVMe";
  if (shape.peer_to_peer) text += ", peer-to-peer";
  return text;
}

int run_template_validate(const std::vector<std::string>& files, const std::vector<std::filesystem::path>& search_dirs,
                          std::ostream& out, std::ostream& err) {
  if (files.empty()) {
    err << "template validate: no template files given\n";
    return 1;
  }
  std::size_t invalid = 0;
  for (const auto& file : files) {
    const auto shape = vmtemplates::load_template_file(file, search_dirs);
    if (shape.ok()) {
      out << file << ": ok (" << summarize_template(*shape) << ")\n";
    } else {
      ++invalid;
      err << shape.error().message << "\n";
    }
  }
  if (invalid > 0 && files.size() > 1) err << invalid << " of " << files.size() << " templates are invalid\n";
  return invalid == 0 ? 0 : 1;
}

}  // namespace hostagent::ctl
