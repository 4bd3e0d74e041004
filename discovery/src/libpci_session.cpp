// discovery/libpci_session: libpci's callbacks, routed back into the guarded call.
#include "hostagent/discovery/libpci_session.hpp"

extern "C" {
#include <pci/pci.h>
}

#include <cerrno>
#include <cstdarg>
#include <cstdio>

namespace hostagent::discovery {
namespace {

std::string format_message(const char* format, va_list args) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, format, args);
  return buf;
}

// GNU attribute rather than [[noreturn]]: libpci's callback type carries it, and clang checks it.
__attribute__((noreturn)) void on_libpci_error(char* msg, ...) {
  va_list args;
  va_start(args, msg);
  libpci_detail::report().message = format_message(msg, args);
  va_end(args);
  if (libpci_detail::escape() != nullptr) std::longjmp(*libpci_detail::escape(), 1);
  std::fprintf(stderr, "hostagent: libpci error outside a guarded call: %s\n", libpci_detail::report().message.c_str());
  std::abort();
}

void on_libpci_warning(char* msg, ...) {
  const int err = errno;  // the failed pread/pwrite's, before formatting can change it
  va_list args;
  va_start(args, msg);
  libpci_detail::report() = LibpciReport{format_message(msg, args), err};
  va_end(args);
}

}  // namespace

namespace libpci_detail {

std::jmp_buf*& escape() {
  thread_local std::jmp_buf* slot = nullptr;
  return slot;
}

LibpciReport& report() {
  thread_local LibpciReport last;
  return last;
}

}  // namespace libpci_detail

void LibpciSession::AccessDeleter::operator()(pci_access* access) const {
  pci_cleanup(access);
}

Result<LibpciSession> LibpciSession::open(const std::filesystem::path& sysfs_bus_pci) {
  std::unique_ptr<pci_access, AccessDeleter> access(pci_alloc());
  if (!access) return Error{ErrorCode::internal, "pci_alloc failed"};
  access->method = PCI_ACCESS_SYS_BUS_PCI;
  access->error = on_libpci_error;
  access->warning = on_libpci_warning;
  std::string path = sysfs_bus_pci.string();
  pci_set_param(access.get(), const_cast<char*>("sysfs.path"), path.data());
  pci_access* raw = access.get();
  if (!call([raw] { pci_init(raw); })) return Error{ErrorCode::io_error, "libpci on " + path + ": " + report().message};
  return LibpciSession(std::move(access));
}

}  // namespace hostagent::discovery
