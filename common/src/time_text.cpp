// hostagent/common/time_text: RFC 3339 in UTC.
#include "hostagent/common/time_text.hpp"

#include <ctime>

namespace hostagent {

std::string rfc3339(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);  // the reentrant form: operation threads format times at once
  char text[32];
  const std::size_t length = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, length);
}

}  // namespace hostagent
