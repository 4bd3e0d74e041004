// virt/libvirt_error: virErrorPtr -> hostagent::Error, and the quiet error handler.
#include "libvirt_error.hpp"

#include <libvirt/virterror.h>

#include <mutex>

namespace hostagent::virt::detail {
namespace {

void ignore_error(void* /*user_data*/, virErrorPtr /*error*/) {}

bool is_transport_error(const LibvirtError& error) {
  // Errors from libvirt's RPC layer are about the socket to libvirtd, never about the request.
  if (error.domain == VIR_FROM_RPC) return true;
  return error.code == VIR_ERR_NO_CONNECT || error.code == VIR_ERR_INVALID_CONN || error.code == VIR_ERR_RPC;
}

}  // namespace

void install_quiet_error_handler() {
  static std::once_flag once;
  // Without a handler libvirt prints every error to stderr (virDefaultErrorFunc).
  std::call_once(once, [] { virSetErrorFunc(nullptr, ignore_error); });
}

LibvirtError take_last_error() {
  LibvirtError copy;
  const virErrorPtr error = virGetLastError();
  if (error == nullptr) {
    copy.code = VIR_ERR_INTERNAL_ERROR;
    copy.message = "libvirt reported a failure without an error";
    return copy;
  }
  copy.code = error->code;
  copy.domain = error->domain;
  copy.message = error->message != nullptr ? error->message : "libvirt gave no message";
  virResetLastError();
  return copy;
}

void discard_last_error() {
  virResetLastError();
}

ErrorCode classify(const LibvirtError& error) noexcept {
  if (is_transport_error(error)) return ErrorCode::unavailable;
  switch (error.code) {
    case VIR_ERR_NO_DOMAIN:
    case VIR_ERR_NO_STORAGE_POOL:
    case VIR_ERR_NO_STORAGE_VOL:
      return ErrorCode::not_found;
    case VIR_ERR_XML_ERROR:
    case VIR_ERR_XML_DETAIL:
    case VIR_ERR_XML_INVALID_SCHEMA:
    case VIR_ERR_INVALID_ARG:
    case VIR_ERR_CONFIG_UNSUPPORTED:
      return ErrorCode::invalid_argument;
    case VIR_ERR_OPERATION_INVALID:  // "domain is not running", "domain is already running"
    case VIR_ERR_DOM_EXIST:
    case VIR_ERR_STORAGE_VOL_EXIST:
      return ErrorCode::conflict;
    default:
      return ErrorCode::internal;
  }
}

Error to_error(const LibvirtError& error, std::string_view what) {
  return Error{classify(error), std::string(what) + ": " + error.message};
}

Error call_error(virConnectPtr conn, const LibvirtError& error, std::string_view what) {
  // virConnectIsAlive resets the last error: `error` was taken before.
  if (conn != nullptr && classify(error) != ErrorCode::unavailable && virConnectIsAlive(conn) == 0) {
    return Error{ErrorCode::unavailable, std::string(what) + ": the connection to libvirt was lost: " + error.message};
  }
  discard_last_error();
  return to_error(error, what);
}

Error last_call_error(virConnectPtr conn, std::string_view what) {
  return call_error(conn, take_last_error(), what);
}

}  // namespace hostagent::virt::detail
