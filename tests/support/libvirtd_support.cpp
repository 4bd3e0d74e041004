// Test helpers for the real libvirtd: see libvirtd_support.hpp.
#include "libvirtd_support.hpp"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <doctest/doctest.h>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "test_support.hpp"

namespace hostagent::testing {
namespace {

void ignore_error(void* /*data*/, virErrorPtr /*error*/) {}

std::string last_error_message() {
  const virErrorPtr error = virGetLastError();
  std::string message = error != nullptr && error->message != nullptr ? error->message : "no libvirt error";
  virResetLastError();
  return message;
}

// Empty when a connection to `uri` opened within `timeout`, else libvirt's last complaint.
std::string try_connect(const std::string& uri, std::chrono::seconds timeout) {
  virSetErrorFunc(nullptr, ignore_error);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why;
  while (std::chrono::steady_clock::now() < deadline) {
    virConnectPtr conn = virConnectOpen(uri.c_str());
    if (conn != nullptr) {
      virConnectClose(conn);
      return {};
    }
    why = last_error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return why;
}

void run_libvirtd_script(const std::string& action) {
  const std::string script = (source_dir() / "scripts" / "libvirtd.sh").string();
  // The restarted libvirtd inherits our environment: keep a test's libvirt logging out of it.
  const CommandResult result = run_command({"env", "-u", "LIBVIRT_DEBUG", "-u", "LIBVIRT_LOG_FILTERS", "-u",
                                            "LIBVIRT_LOG_OUTPUTS", "-u", "LIBVIRT_DEFAULT_URI", script, action});
  REQUIRE_MESSAGE(result.exit_code == 0,
                  script << " " << action << " exited " << result.exit_code << ": " << result.output);
}

// A connection for cleanup, or nullptr; never fails the test.
virConnectPtr cleanup_connection(const std::string& uri) {
  virSetErrorFunc(nullptr, ignore_error);
  virConnectPtr conn = virConnectOpen(uri.c_str());
  virResetLastError();
  return conn;
}

}  // namespace

std::optional<std::string> libvirtd_uri_or_skip() {
  const std::string uri = env_or("HOSTAGENT_LIBVIRTD_URI", "qemu:///system");
  const bool local = uri.find("///") != std::string::npos;
  std::string why;
  if (local && !find_program("libvirtd")) {
    why = "libvirtd is not installed";
  } else {
    why = try_connect(uri, std::chrono::seconds(60));
  }
  if (why.empty()) return uri;
  const std::string message = "libvirtd at " + uri + " is not running or does not answer (" + why +
                              "); start it with scripts/libvirtd.sh start";
  if (env_or("HOSTAGENT_REQUIRE_LIBVIRTD", "") == "1") FAIL(message);
  skip(message);
  return std::nullopt;
}

void restart_libvirtd() {
  run_libvirtd_script("restart");
}

void stop_libvirtd() {
  run_libvirtd_script("stop");
}

void remove_domain(const std::string& uri, const std::string& name) {
  virConnectPtr conn = cleanup_connection(uri);
  if (conn == nullptr) return;
  if (virDomainPtr domain = virDomainLookupByName(conn, name.c_str()); domain != nullptr) {
    virDomainDestroy(domain);
    if (virDomainUndefineFlags(domain, VIR_DOMAIN_UNDEFINE_NVRAM | VIR_DOMAIN_UNDEFINE_MANAGED_SAVE) < 0) {
      virDomainUndefine(domain);
    }
    virDomainFree(domain);
  }
  virResetLastError();
  virConnectClose(conn);
}

void remove_pool(const std::string& uri, const std::string& name) {
  virConnectPtr conn = cleanup_connection(uri);
  if (conn == nullptr) return;
  if (virStoragePoolPtr pool = virStoragePoolLookupByName(conn, name.c_str()); pool != nullptr) {
    virStoragePoolDestroy(pool);
    virStoragePoolUndefine(pool);
    virStoragePoolFree(pool);
  }
  virResetLastError();
  virConnectClose(conn);
}

}  // namespace hostagent::testing
