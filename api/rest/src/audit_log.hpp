// api/rest, private: the audit log of changes, one JSON line per POST or DELETE. The file is named by
// the configuration only, never by a request; it is opened once with O_APPEND, so each line lands
// whole at the end even when logrotate's copytruncate or another writer shares it.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "hostagent/api/http_server.hpp"
#include "hostagent/common/posix_file.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::api::detail {

struct AuditEntry {
  std::string time;  // RFC 3339, UTC
  const HttpRequest* request = nullptr;
  unsigned status = 0;
  std::string operation;  // the operation the request started; "" for none
};

// {"time","principal","role","method","target","status","operation"} on one line, newline-terminated.
std::string audit_line(const AuditEntry& entry);

class AuditLog {
 public:
  // "" logs to stderr. io_error naming the file when it cannot be opened for appending.
  static Result<std::unique_ptr<AuditLog>> open(const std::filesystem::path& path);
  // One write(2) of the whole line; a failure is reported on stderr (the request has been answered).
  void write(const std::string& line);

 private:
  AuditLog(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::filesystem::path path_;
  posix::FileDescriptor fd_;  // -1 for stderr
  std::mutex mutex_;
};

}  // namespace hostagent::api::detail
