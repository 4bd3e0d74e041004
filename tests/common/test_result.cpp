#include <doctest/doctest.h>

#include <cerrno>

#include "hostagent/common/result.hpp"

namespace hostagent {
namespace {

Result<int> half(int value) {
  if (value % 2 != 0) return Error{ErrorCode::invalid_argument, "odd: " + std::to_string(value)};
  return value / 2;
}

Result<int> quarter(int value) {
  HA_TRY(const int h, half(value));
  return half(h);
}

TEST_CASE("Result carries a value or an error, and HA_TRY propagates the first error") {
  CHECK(quarter(8).value() == 2);
  const auto odd = quarter(6);
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == ErrorCode::invalid_argument);
  CHECK(odd.error().message == "odd: 3");
}

TEST_CASE("errno_error names the operation and the path, and maps ENOENT to not_found") {
  const auto missing = errno_error(ENOENT, "read", "/sys/x");
  CHECK(missing.code == ErrorCode::not_found);
  CHECK(missing.message == "read /sys/x: No such file or directory");
  CHECK(errno_error(EACCES, "write", "/sys/y").code == ErrorCode::io_error);
}

}  // namespace
}  // namespace hostagent
