// hostagent/common/time_text: times as hostagent writes them in records, operations and the audit
// log, one format for all.
#pragma once

#include <chrono>
#include <string>

namespace hostagent {

// RFC 3339 in UTC, seconds precision: "2026-11-29T23:00:00Z".
std::string rfc3339(std::chrono::system_clock::time_point time);

}  // namespace hostagent
