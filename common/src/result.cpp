#include "hostagent/common/result.hpp"

#include <cstring>

namespace hostagent {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::not_found:
      return "not_found";
    case ErrorCode::parse_error:
      return "parse_error";
    case ErrorCode::io_error:
      return "io_error";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::conflict:
      return "conflict";
    case ErrorCode::does_not_fit:
      return "does_not_fit";
    case ErrorCode::unavailable:
      return "unavailable";
    case ErrorCode::internal:
      return "internal";
  }
  return "unknown";
}

std::optional<ErrorCode> error_code_from(std::string_view text) noexcept {
  for (int i = 0; i <= static_cast<int>(ErrorCode::internal); ++i) {
    const auto code = static_cast<ErrorCode>(i);
    if (text == to_string(code)) return code;
  }
  return std::nullopt;
}

Error field_error(const std::string& field, const std::string& why) {
  return Error{ErrorCode::invalid_argument, field + ": " + why, field};
}

Error errno_error(int err, const std::string& operation, const std::string& path) {
  const ErrorCode code = (err == ENOENT || err == ENOTDIR) ? ErrorCode::not_found : ErrorCode::io_error;
  return Error{code, operation + " " + path + ": " + std::strerror(err)};
}

}  // namespace hostagent
