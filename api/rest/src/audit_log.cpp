// api/rest: the audit log.
#include "audit_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <type_traits>

#include "hostagent/common/text.hpp"

namespace hostagent::api::detail {
namespace {

// A request's text in a JSON string: valid UTF-8 always, null when there is none.
boost::json::value text_or_null(const std::string& value) {
  if (value.empty()) return nullptr;
  return boost::json::value(text::valid_utf8(value));
}

}  // namespace

AuditSubject audit_subject(const Command& command) {
  return std::visit(
      [](const auto& c) -> AuditSubject {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, command::CreateVm>) {
          return {c.request.name, c.request.template_name, c.request.request_id, ""};
        } else if constexpr (std::is_same_v<T, command::StartVm> || std::is_same_v<T, command::StopVm> ||
                             std::is_same_v<T, command::RebootVm> || std::is_same_v<T, command::DeleteVm> ||
                             std::is_same_v<T, command::OpenConsole>) {
          return {c.name, "", "", ""};
        } else if constexpr (std::is_same_v<T, command::ClearQuarantine> || std::is_same_v<T, command::CleanDevice>) {
          return {"", "", "", c.address.to_string()};
        } else {
          return {};
        }
      },
      command);
}

std::string audit_line(const AuditEntry& entry) {
  const HttpRequest& request = *entry.request;
  const boost::json::object line{{"time", entry.time},
                                 {"principal", text_or_null(request.identity.principal)},
                                 {"role", to_string(request.identity.role)},
                                 {"remote", text_or_null(request.remote)},
                                 {"method", text_or_null(request.method)},
                                 {"target", text_or_null(request.target)},
                                 {"status", entry.status},
                                 {"vm", text_or_null(entry.subject.vm)},
                                 {"template", text_or_null(entry.subject.template_name)},
                                 {"request_id", text_or_null(entry.subject.request_id)},
                                 {"device", text_or_null(entry.subject.device)},
                                 {"operation", text_or_null(entry.operation)}};
  return boost::json::serialize(line) + "\n";
}

Result<std::unique_ptr<posix::FileDescriptor>> AuditLog::open_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) return errno_error(errno, "open the audit log (api.audit_log) for appending", path.string());
  return std::make_unique<posix::FileDescriptor>(fd);
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const std::filesystem::path& path) {
  if (path.empty()) return std::unique_ptr<AuditLog>(new AuditLog(path, nullptr));
  HA_TRY(auto file, open_file(path));
  return std::unique_ptr<AuditLog>(new AuditLog(path, std::move(file)));
}

Status AuditLog::reopen() {
  if (path_.empty()) return ok_status();
  HA_TRY(auto file, open_file(path_));
  std::unique_ptr<posix::FileDescriptor> old;
  {
    std::lock_guard lock(mutex_);
    old = std::exchange(file_, std::move(file));
  }
  // Every line written to the old file went with a write(2) that has returned; close(2) reports
  // what an NFS server kept for it.
  if (const int err = old->close(); err != 0) {
    std::cerr << "hostagentd: audit log " << path_.string() << ": closing the rotated file: " << std::strerror(err)
              << std::endl;
  }
  return ok_status();
}

void AuditLog::write(const std::string& line) {
  std::lock_guard lock(mutex_);
  if (!file_) {
    std::cerr << "hostagentd: audit: " << line << std::flush;
    return;
  }
  if (const int err = posix::write_all(file_->get(), line); err != 0) {
    std::cerr << "hostagentd: audit log " << path_.string() << ": " << std::strerror(err) << "; lost: " << line
              << std::flush;
  }
}

}  // namespace hostagent::api::detail
