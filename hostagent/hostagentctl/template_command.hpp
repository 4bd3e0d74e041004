// hostagentctl template validate: checks template files the way hostagentd will load them and
// prints, per file, a one-line summary of the shape or every problem with its file:line:column.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::ctl {

// "gx3d-160x1792x8h100, 160 vCPUs, 1792GiB in 1G pages, 8 H100 GPUs, 1 VF per GPU, 8 NVMe, peer-to-peer"
std::string summarize_template(const vmtemplates::VmTemplate& shape);

// Validates each file (parents named by `extends` are looked up in search_dirs, then beside the file).
// Prints "FILE: ok (summary)" to out for a valid one and its problems to err for an invalid one.
// Returns 0 when every file is valid, 1 otherwise.
int run_template_validate(const std::vector<std::string>& files, const std::vector<std::filesystem::path>& search_dirs,
                          std::ostream& out, std::ostream& err);

}  // namespace hostagent::ctl
