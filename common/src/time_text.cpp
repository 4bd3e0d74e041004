// hostagent/common/time_text: RFC 3339 in UTC, written and read.
#include "hostagent/common/time_text.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace hostagent {
namespace {

bool digits(std::string_view text, std::size_t from, std::size_t count) {
  if (from + count > text.size()) return false;
  return std::all_of(text.begin() + static_cast<std::ptrdiff_t>(from),
                     text.begin() + static_cast<std::ptrdiff_t>(from + count),
                     [](char c) { return c >= '0' && c <= '9'; });
}

int number_at(std::string_view text, std::size_t from, std::size_t count) {
  int out = 0;
  for (std::size_t i = from; i < from + count; ++i) out = out * 10 + (text[i] - '0');
  return out;
}

bool in_range(std::string_view text, std::size_t from, int low, int high) {
  const int value = number_at(text, from, 2);
  return value >= low && value <= high;
}

// The digits after the '.', "" when the timestamp has no fraction.
std::string_view fraction_of(std::string_view timestamp) {
  return timestamp.size() > 21 ? timestamp.substr(20, timestamp.size() - 21) : std::string_view();
}

}  // namespace

std::string rfc3339(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);  // the reentrant form: operation threads format times at once
  char text[32];
  const std::size_t length = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, length);
}

std::string rfc3339_ms(std::chrono::system_clock::time_point time) {
  const auto since_epoch = time.time_since_epoch();
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(
                          since_epoch - std::chrono::duration_cast<std::chrono::seconds>(since_epoch))
                          .count();
  std::string text = rfc3339(time);
  char fraction[8];
  std::snprintf(fraction, sizeof fraction, ".%03d", static_cast<int>(millis < 0 ? millis + 1000 : millis));
  text.insert(text.size() - 1, fraction);
  return text;
}

bool is_utc_timestamp(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then .F... (1 to 9 digits) optionally, then Z.
  if (text.size() < 20 || !digits(text, 0, 4) || text[4] != '-' || !digits(text, 5, 2) || text[7] != '-' ||
      !digits(text, 8, 2) || text[10] != 'T' || !digits(text, 11, 2) || text[13] != ':' || !digits(text, 14, 2) ||
      text[16] != ':' || !digits(text, 17, 2) || text.back() != 'Z') {
    return false;
  }
  if (!in_range(text, 5, 1, 12) || !in_range(text, 8, 1, 31) || !in_range(text, 11, 0, 23) ||
      !in_range(text, 14, 0, 59) || !in_range(text, 17, 0, 60)) {
    return false;
  }
  if (text.size() == 20) return true;
  const std::size_t fraction = text.size() - 21;
  return text[19] == '.' && fraction >= 1 && fraction <= 9 && digits(text, 20, fraction);
}

std::optional<std::chrono::system_clock::time_point> time_of(std::string_view timestamp) {
  if (!is_utc_timestamp(timestamp)) return std::nullopt;
  std::tm utc{};
  utc.tm_year = number_at(timestamp, 0, 4) - 1900;
  utc.tm_mon = number_at(timestamp, 5, 2) - 1;
  utc.tm_mday = number_at(timestamp, 8, 2);
  utc.tm_hour = number_at(timestamp, 11, 2);
  utc.tm_min = number_at(timestamp, 14, 2);
  utc.tm_sec = number_at(timestamp, 17, 2);
  auto time = std::chrono::system_clock::from_time_t(timegm(&utc));
  const auto fraction = fraction_of(timestamp);
  long long nanoseconds = 0;
  for (std::size_t i = 0; i < 9; ++i) nanoseconds = nanoseconds * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
  return time + std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(nanoseconds));
}

bool timestamp_before(std::string_view a, std::string_view b) {
  // The first 19 characters are fixed-width digits: string order is time order there.
  if (const int c = a.substr(0, 19).compare(b.substr(0, 19)); c != 0) return c < 0;
  std::string fa(fraction_of(a));
  std::string fb(fraction_of(b));
  const std::size_t width = std::max(fa.size(), fb.size());
  fa.resize(width, '0');
  fb.resize(width, '0');
  return fa < fb;
}

}  // namespace hostagent
