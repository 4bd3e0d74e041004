// discovery/libpci_session: libpci opened on a sysfs root, safe to call from a daemon. libpci declares
// its error callback noreturn ("write error message and quit") and the default one calls exit(); a
// daemon must not exit because one config file is odd, so the session's callback jumps back to the
// guarded call in progress (libpci is C: the jump skips no destructor). Failed reads and writes come
// through libpci's warning callback with a zero return; its text and errno are kept for the caller's
// message. One implementation for the discovery's reader (numa/) and the ACS/ATS writer (vfio/).
#pragma once

#include <csetjmp>
#include <filesystem>
#include <memory>
#include <string>

#include "hostagent/common/result.hpp"

struct pci_access;

namespace hostagent::discovery {

// What libpci last said on this thread, since the current guarded call began.
struct LibpciReport {
  std::string message;  // the error's or warning's text; "" when it said nothing
  int err = 0;          // errno when the warning was raised (the failed pread/pwrite's), else 0
};

namespace libpci_detail {
std::jmp_buf*& escape();
LibpciReport& report();
}  // namespace libpci_detail

class LibpciSession {
 public:
  // libpci's sysfs method (PCI_ACCESS_SYS_BUS_PCI) on sysfs_bus_pci, "<root>/sys/bus/pci".
  static Result<LibpciSession> open(const std::filesystem::path& sysfs_bus_pci);

  pci_access* access() const { return access_.get(); }

  // Runs f, which calls only into libpci and writes its results outside this frame (so nothing
  // here changes between setjmp and longjmp), with a libpci error turned into a false return.
  template <typename F>
  static bool call(F&& f) {
    libpci_detail::report() = LibpciReport{};
    std::jmp_buf escape;
    libpci_detail::escape() = &escape;
    if (setjmp(escape) != 0) {
      libpci_detail::escape() = nullptr;
      return false;
    }
    f();
    libpci_detail::escape() = nullptr;
    return true;
  }

  // What libpci said during the last call on this thread.
  static const LibpciReport& report() { return libpci_detail::report(); }

 private:
  struct AccessDeleter {
    void operator()(pci_access* access) const;
  };
  explicit LibpciSession(std::unique_ptr<pci_access, AccessDeleter> access) : access_(std::move(access)) {}
  std::unique_ptr<pci_access, AccessDeleter> access_;
};

}  // namespace hostagent::discovery
