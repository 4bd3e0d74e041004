// api/rest: the audit log.
#include "audit_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>

namespace hostagent::api::detail {

std::string audit_line(const AuditEntry& entry) {
  const HttpRequest& request = *entry.request;
  const boost::json::object line{
      {"time", entry.time},
      {"principal", request.identity.principal},
      {"role", to_string(request.identity.role)},
      {"method", request.method},
      {"target", request.target},
      {"status", entry.status},
      {"operation", entry.operation.empty() ? boost::json::value(nullptr) : boost::json::value(entry.operation)}};
  return boost::json::serialize(line) + "\n";
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const std::filesystem::path& path) {
  if (path.empty()) return std::unique_ptr<AuditLog>(new AuditLog(path, -1));
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) return errno_error(errno, "open the audit log (api.audit_log) for appending", path.string());
  return std::unique_ptr<AuditLog>(new AuditLog(path, fd));
}

void AuditLog::write(const std::string& line) {
  std::lock_guard lock(mutex_);
  if (fd_.get() < 0) {
    std::cerr << "hostagentd: audit: " << line << std::flush;
    return;
  }
  if (const int err = posix::write_all(fd_.get(), line); err != 0) {
    std::cerr << "hostagentd: audit log " << path_.string() << ": " << std::strerror(err) << "; lost: " << line
              << std::flush;
  }
}

}  // namespace hostagent::api::detail
