// hostagent/build_info: the version and build facts both binaries print with --version.
#pragma once

#include <string>

namespace hostagent {

std::string version_string(const char* program);

}  // namespace hostagent
