// hostagent/install_paths: the shipped templates, relative to the running executable.
#include "hostagent/program_support/install_paths.hpp"

#include <system_error>

namespace hostagent::program_support {

namespace fs = std::filesystem;

fs::path shipped_template_dir() {
  // /proc/self/exe is the kernel's link to the executable's file (proc(5)), symlinks resolved, so
  // /usr/sbin/hostagentd called through a link elsewhere still finds /usr/share.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  // Without /proc (a chroot not set up for it), the packaged location: what an installed binary
  // would have found.
  if (ec || exe.empty()) return "/usr/share/hostagent/templates";
  return exe.parent_path().parent_path() / "share" / "hostagent" / "templates";
}

}  // namespace hostagent::program_support
