// Times as hostagent writes and reads them: RFC 3339 in UTC, what is valid, and which came first.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "hostagent/common/time_text.hpp"

namespace hostagent {
namespace {

TEST_CASE("rfc3339 writes UTC to the second, and what it writes is valid") {
  const auto time = std::chrono::sys_days{std::chrono::year{2026} / 11 / 29} + std::chrono::hours{23} +
                    std::chrono::minutes{5} + std::chrono::seconds{7} + std::chrono::milliseconds{250};
  CHECK(rfc3339(time) == "2026-11-29T23:05:07Z");
  CHECK(is_utc_timestamp(rfc3339(time)));
}

TEST_CASE("a UTC timestamp: the form, the fields' ranges, a fraction of 1 to 9 digits, Z only") {
  for (const char* valid :
       {"2026-11-29T23:00:00Z", "2026-12-31T00:59:60Z", "2026-11-29T23:00:00.25Z", "2026-11-29T23:00:00.123456789Z"}) {
    CAPTURE(valid);
    CHECK(is_utc_timestamp(valid));
  }
  for (const char* invalid :
       {"", "2026-11-29", "2026-11-29 23:00:00Z", "2026-11-29T23:00:00", "2026-11-29T23:00:00+01:00",
        "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-32T00:00:00Z", "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z", "2026-01-01T00:00:61Z", "2026-11-29T23:00:00.Z", "2026-11-29T23:00:00.1234567890Z",
        "2026-11-29T23:00:00,5Z", "2O26-11-29T23:00:00Z"}) {
    CAPTURE(invalid);
    CHECK_FALSE(is_utc_timestamp(invalid));
  }
}

TEST_CASE("timestamps order by time: a fraction after its whole second, fractions of any width") {
  CHECK(timestamp_before("2026-11-29T23:00:00Z", "2026-11-29T23:00:01Z"));
  CHECK(timestamp_before("2026-11-29T23:59:59Z", "2026-11-30T00:00:00Z"));
  // String order would put "." (0x2E) before "Z" (0x5A): 23:00:00.5 before 23:00:00.
  CHECK(timestamp_before("2026-11-29T23:00:00Z", "2026-11-29T23:00:00.5Z"));
  CHECK_FALSE(timestamp_before("2026-11-29T23:00:00.5Z", "2026-11-29T23:00:00Z"));
  CHECK(timestamp_before("2026-11-29T23:00:00.25Z", "2026-11-29T23:00:00.3Z"));
  CHECK_FALSE(timestamp_before("2026-11-29T23:00:00.50Z", "2026-11-29T23:00:00.5Z"));  // equal
  CHECK_FALSE(timestamp_before("2026-11-29T23:00:00Z", "2026-11-29T23:00:00Z"));
}

}  // namespace
}  // namespace hostagent

namespace hostagent {
namespace {

TEST_CASE("time_of reads back what rfc3339 and rfc3339_ms write, fractions too, and refuses what is not one") {
  const auto now = std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
  CHECK(time_of(rfc3339(now)) == std::optional<std::chrono::system_clock::time_point>(now));
  const auto later = now + std::chrono::milliseconds(250);
  CHECK(rfc3339_ms(later).ends_with(".250Z"));
  CHECK(is_utc_timestamp(rfc3339_ms(later)));
  CHECK(rfc3339_ms(now).ends_with(".000Z"));
  CHECK(time_of(rfc3339_ms(later)) == std::optional<std::chrono::system_clock::time_point>(later));
  CHECK(time_of("1970-01-01T00:01:40.75Z") ==
        std::optional(std::chrono::system_clock::from_time_t(100) + std::chrono::milliseconds(750)));
  CHECK_FALSE(time_of("2026-12-04T10:00:00+01:00").has_value());
  CHECK_FALSE(time_of("yesterday").has_value());
}

}  // namespace
}  // namespace hostagent
