// virt/libvirt_error: the one place where libvirt's virErrorPtr becomes a hostagent::Error. libvirt
// keeps its last error per thread (virGetLastError), so every failed call is read right after it
// returns, on the thread that made it.
#pragma once

#include <libvirt/libvirt.h>

#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent::virt::detail {

// A copy of libvirt's thread-local last error, taken before the next libvirt call resets it.
struct LibvirtError {
  int code = 0;    // virErrorNumber
  int domain = 0;  // virErrorDomain: which part of libvirt raised it
  std::string message;
};

// Installs a no-op handler so libvirt never prints errors to stderr on its own; we report them.
void install_quiet_error_handler();

// Takes (and clears) the calling thread's last libvirt error.
LibvirtError take_last_error();

// Clears the calling thread's last error after a failure we deliberately ignore.
void discard_last_error();

ErrorCode classify(const LibvirtError& error) noexcept;

// "WHAT: libvirt's message", with the code from classify().
Error to_error(const LibvirtError& error, std::string_view what);

// The error of a call that failed on `conn`: a connection that is no longer alive makes it
// ErrorCode::unavailable whatever libvirt's code was (a call racing libvirtd's death may report
// anything from "internal error" to "Cannot write data").
Error call_error(virConnectPtr conn, const LibvirtError& error, std::string_view what);
Error last_call_error(virConnectPtr conn, std::string_view what);

}  // namespace hostagent::virt::detail
