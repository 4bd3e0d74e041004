// hostagent/install_paths: where both binaries find what is installed beside them.
#pragma once

#include <filesystem>

namespace hostagent::program_support {

// The shipped templates: PREFIX/share/hostagent/templates, PREFIX being the directory above the
// running executable's. Installed, that is /usr for /usr/sbin/hostagentd and /usr/bin/hostagentctl;
// in a build tree it is the tree itself, where CMake links share/hostagent/templates to the
// source's. Found at run time rather than compiled in, so the binaries a test run exercised are the
// ones the packages carry, and their compile lines name no path of the checkout.
std::filesystem::path shipped_template_dir();

}  // namespace hostagent::program_support
