// hostagent/build_info: the version and build facts both binaries print with --version.
#pragma once

#include <string>

namespace hostagent::program_support {

// Two lines: "hostagentd 0.1.0 (commit 151ff6e1a2b3, RelWithDebInfo build, GNU 12.2.0)" and
// "libraries: libvirt 9.0.0, Boost 1.81.0, yaml-cpp 0.7.0, hwloc 2.9.0, libsystemd 252" (libvirt as
// loaded at run time, the others as built against).
std::string version_string(const char* program);

}  // namespace hostagent::program_support
