// common/result: the one error type of hostagent. Every fallible call returns Result<T>; errno,
// libvirt errors and parse failures are translated into an Error where they arise, so callers above
// never see a raw errno or a virErrorPtr. Broken invariants are not errors: they abort (see HA_ASSERT).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hostagent {

// Stable codes: the API maps them to HTTP statuses in one table, the CLI to exit codes.
enum class ErrorCode {
  invalid_argument,  // the caller's input is wrong; the message names the field and the fix
  not_found,         // a path, device, template or VM that does not exist
  parse_error,       // a file or kernel attribute whose contents are not what the kernel writes
  io_error,          // the environment failed us: EACCES, EIO, a vanished sysfs node
  unsupported,       // asked of a source that cannot answer (e.g. IOMMU groups from an hwloc XML)
  conflict,          // the resource is held by someone else
  does_not_fit,      // placement found no room
  unavailable,       // a service we depend on (libvirtd) cannot be reached now; retrying may work
  internal,  // a library (hwloc, libpci) failed in a way we cannot attribute (the last: error_code_from counts to it)
};

const char* to_string(ErrorCode code) noexcept;
// The code to_string wrote (a durable record's); nullopt for any other text.
std::optional<ErrorCode> error_code_from(std::string_view text) noexcept;

struct Error {
  ErrorCode code;
  std::string message;
  // For invalid_argument: the caller's field the error is about ("name", "macs[1]"), "" when none.
  // The API answers it as the problem's `field`; nothing reads a field out of a message.
  std::string field = {};
};

// invalid_argument about `field`, worded "FIELD: WHY" as every such message is.
Error field_error(const std::string& field, const std::string& why);

// Builds an Error from errno for an operation on a path: "read /sys/...: Permission denied".
Error errno_error(int err, const std::string& operation, const std::string& path);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return std::holds_alternative<T>(state_); }
  explicit operator bool() const noexcept { return ok(); }

  const T& value() const& {
    check_ok();
    return std::get<T>(state_);
  }
  T& value() & {
    check_ok();
    return std::get<T>(state_);
  }
  T&& value() && {
    check_ok();
    return std::get<T>(std::move(state_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const Error& error() const& {
    if (ok()) abort_with("Result::error() called on a value");
    return std::get<Error>(state_);
  }
  Error&& error() && {
    if (ok()) abort_with("Result::error() called on a value");
    return std::get<Error>(std::move(state_));
  }

 private:
  void check_ok() const {
    if (!ok()) abort_with(std::get<Error>(state_).message.c_str());
  }
  [[noreturn]] static void abort_with(const char* what) {
    std::fprintf(stderr, "hostagent: broken invariant: value of a failed Result: %s\n", what);
    std::abort();
  }
  std::variant<T, Error> state_;
};

struct Unit {};
using Status = Result<Unit>;
inline Status ok_status() {
  return Unit{};
}

// A broken invariant: the program is wrong, not the environment. Abort so the unit restarts us.
#define HA_ASSERT(cond)                                                                              \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      std::fprintf(stderr, "hostagent: assertion failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                                  \
    }                                                                                                \
  } while (0)

// Propagates an error from an expression returning Result<T>; binds the value otherwise.
#define HA_CONCAT_INNER(a, b) a##b
#define HA_CONCAT(a, b) HA_CONCAT_INNER(a, b)
#define HA_TRY_IMPL(tmp, decl, expr)            \
  auto tmp = (expr);                            \
  if (!tmp.ok()) return std::move(tmp).error(); \
  decl = std::move(tmp).value()
#define HA_TRY(decl, expr) HA_TRY_IMPL(HA_CONCAT(ha_try_, __LINE__), decl, expr)
#define HA_TRY_STATUS(expr)                                     \
  do {                                                          \
    auto ha_status_ = (expr);                                   \
    if (!ha_status_.ok()) return std::move(ha_status_).error(); \
  } while (0)

}  // namespace hostagent
