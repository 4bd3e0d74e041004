// api/rest, private: the audit log of changes, one JSON line per attempted POST or DELETE (one
// whose sender is known: see RequestRecord::authenticated). The file is named by the configuration
// only, never by a request; it is opened with O_APPEND, so each line lands whole at the end even
// when logrotate's copytruncate or another writer shares it, and reopened on request (SIGHUP after
// a rotation by rename), so lines written after it go to the new file.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "hostagent/api/http_server.hpp"
#include "hostagent/api/rest_commands.hpp"
#include "hostagent/common/posix_file.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::api::detail {

// What a change named, from its parsed command: "" for what it did not name (or a request that
// did not parse).
struct AuditSubject {
  std::string vm;
  std::string template_name;
  std::string request_id;
  std::string device;  // a PCI address: the quarantine cleared, the device to clean
};
AuditSubject audit_subject(const Command& command);

struct AuditEntry {
  std::string time;  // RFC 3339, UTC
  const HttpRequest* request = nullptr;
  unsigned status = 0;
  AuditSubject subject;
  std::string operation;  // the operation the request started; "" for none
};

// {"time","principal","role","remote","method","target","status","vm","template","request_id",
// "device","operation"} on one line, newline-terminated; what a change did not name is null. Always valid
// JSON of valid UTF-8, whatever bytes the request held (text::valid_utf8).
std::string audit_line(const AuditEntry& entry);

class AuditLog {
 public:
  // "" logs to stderr. io_error naming the file when it cannot be opened for appending.
  static Result<std::unique_ptr<AuditLog>> open(const std::filesystem::path& path);
  // One write(2) of the whole line; a failure is reported on stderr (the request has been answered).
  void write(const std::string& line);
  // Opens the path again and writes there from now on (the old file, renamed by a rotation, is
  // closed). On failure the old file stays in use and the error is returned.
  Status reopen();

 private:
  AuditLog(std::filesystem::path path, std::unique_ptr<posix::FileDescriptor> file)
      : path_(std::move(path)), file_(std::move(file)) {}
  static Result<std::unique_ptr<posix::FileDescriptor>> open_file(const std::filesystem::path& path);
  const std::filesystem::path path_;
  std::mutex mutex_;
  std::unique_ptr<posix::FileDescriptor> file_;  // null for stderr; guarded by mutex_
};

}  // namespace hostagent::api::detail
