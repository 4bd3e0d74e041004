// hostagent/common/time_text: times as hostagent writes them in records, operations and the audit
// log, one format for all, and the one reading of it: what is valid, and which came first.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace hostagent {

// RFC 3339 in UTC, seconds precision: "2026-11-29T23:00:00Z".
std::string rfc3339(std::chrono::system_clock::time_point time);
// The same with milliseconds, "2026-11-29T23:00:00.250Z": for steps that take less than a second,
// whose durations are read back from their times (a device's cleaning evidence).
std::string rfc3339_ms(std::chrono::system_clock::time_point time);

// RFC 3339 in UTC as hostagent writes it: 2026-11-29T23:00:00Z, optionally with a fraction of a
// second (2026-11-29T23:00:00.25Z). Offsets other than Z are refused: every time here is UTC.
bool is_utc_timestamp(std::string_view text);
// The time a valid timestamp names, its fraction to the nanosecond; nullopt when it is not one.
std::optional<std::chrono::system_clock::time_point> time_of(std::string_view timestamp);
// Chronological order of two valid timestamps (plain string order misplaces fractions: "." < "Z").
bool timestamp_before(std::string_view a, std::string_view b);

}  // namespace hostagent
