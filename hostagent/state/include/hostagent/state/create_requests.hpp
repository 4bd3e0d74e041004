// hostagent/state/create_requests: what each create that carried a request id did, on disk, so that
// the id keeps its meaning across deletes and restarts: a replay is answered with that create, never
// run again. One JSON file per create, named by its operation id (unique across restarts), written
// durably before the create runs and again when its outcome is known.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::state {

// The version of a create request record's layout, written in its "format" (json_fields::format_version).
inline constexpr int kCreateRequestFormat = 1;

// pending: accepted, not ended (after a restart, the daemon decides from what exists);
// created: the VM was made and exists; failed: nothing was made (rolled back or refused in the
// queue); gone: the VM was made and no longer exists.
enum class CreateOutcome { pending, created, failed, gone };
std::string_view to_string(CreateOutcome outcome) noexcept;

struct CreateRequestRecord {
  std::string operation;      // the create's operation id; the file's name: [A-Za-z0-9_.-]{1,128}
  std::string request_id;     // the caller's idempotency key: printable ASCII, no spaces, <= 128
  std::string vm;             // the VM it asked for
  std::string template_name;  // and its template
  std::string submitted_at;   // RFC 3339, UTC
  CreateOutcome outcome = CreateOutcome::pending;
  std::string ended_at;    // created, failed, gone: when the create ended; "" while pending
  std::string error_code;  // failed: the error's code (to_string(ErrorCode)); "" otherwise
  std::string error;       // failed: why; gone: how the VM went ("deleted by operation op-..")
  std::string gone_at;     // gone: when the VM was seen gone; "" otherwise
  // Each field of the request as it was asked (name, template, uuid, boot_image, macs,
  // ssh_authorized_keys, user_data, placement), by its SHA-256: a replay must ask for all of it
  // again, and the digest keeps a tenant's keys and user data out of the file. Empty in records an
  // earlier release wrote, which kept only vm and template.
  std::map<std::string, std::string> fingerprints;
  bool operator==(const CreateRequestRecord&) const = default;
};

class CreateRequests {
 public:
  // Creates the directory (mode 0700) when missing.
  static Result<CreateRequests> open(const std::filesystem::path& directory);

  Status write(const CreateRequestRecord& record);
  Status remove(const std::string& operation);  // absent: ok
  // Every record on disk. A file that cannot be parsed is an error naming it: a request id whose
  // create the daemon cannot read could otherwise make a second VM.
  Result<std::vector<CreateRequestRecord>> records() const;

 private:
  explicit CreateRequests(std::filesystem::path directory) : directory_(std::move(directory)) {}
  std::filesystem::path directory_;
};

}  // namespace hostagent::state
