// The tests' hand on the fake Fabric Manager (fake_nvfm.cpp): the same libnvfm.so.1 the adapter
// opens, opened here too (dlopen hands both the one instance), its fakefm_* functions resolved.
#pragma once

#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace hostagent::testing {

class FakeFm {
 public:
  FakeFm() : library_(dlopen(path().c_str(), RTLD_NOW | RTLD_LOCAL)) {
    REQUIRE_MESSAGE(library_ != nullptr, "the fake FM library: " << dlerror());
    start_ = resolve<int(const char*, int, const char*)>("fakefm_start");
    stop_ = resolve<void()>("fakefm_stop");
    restart_ = resolve<void()>("fakefm_restart");
    set_shared_mode_ = resolve<void(int)>("fakefm_set_shared_mode");
    fail_nvlinks_ = resolve<void(const char*, int)>("fakefm_fail_nvlinks");
    active_ = resolve<unsigned(unsigned*, unsigned)>("fakefm_active");
    calls_ = resolve<unsigned(const char*)>("fakefm_calls");
    initialised_ = resolve<int()>("fakefm_initialised");
  }
  FakeFm(const FakeFm&) = delete;
  FakeFm& operator=(const FakeFm&) = delete;
  ~FakeFm() { dlclose(library_); }

  // Built beside the suites (tests/fabric/CMakeLists.txt), found through the build tree CTest names.
  static std::string path() {
    const char* dir = std::getenv("HOSTAGENT_BINARY_DIR");
    REQUIRE_MESSAGE(dir != nullptr, "HOSTAGENT_BINARY_DIR is set by CTest");
    return std::string(dir) + "/tests/fabric/libnvfm.so.1";
  }

  void start(const std::string& address, bool unix_socket, const std::string& gpus) {
    REQUIRE(start_(address.c_str(), unix_socket ? 1 : 0, gpus.c_str()) == 0);
  }
  void stop() { stop_(); }
  void restart() { restart_(); }
  void set_shared_mode(bool shared) { set_shared_mode_(shared ? 1 : 0); }
  void fail_nvlinks(const std::string& bus_id, bool nvswitch = false) {
    fail_nvlinks_(bus_id.c_str(), nvswitch ? 1 : 0);
  }
  std::vector<unsigned> active() {
    std::vector<unsigned> ids(64);
    ids.resize(active_(ids.data(), static_cast<unsigned>(ids.size())));
    return ids;
  }
  unsigned calls(const std::string& name) { return calls_(name.c_str()); }
  bool initialised() { return initialised_() != 0; }

 private:
  template <typename Fn>
  Fn* resolve(const char* name) {
    void* symbol = dlsym(library_, name);
    REQUIRE_MESSAGE(symbol != nullptr, "the fake FM library has no " << name);
    return reinterpret_cast<Fn*>(symbol);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  }

  void* library_;
  int (*start_)(const char*, int, const char*) = nullptr;
  void (*stop_)() = nullptr;
  void (*restart_)() = nullptr;
  void (*set_shared_mode_)(int) = nullptr;
  void (*fail_nvlinks_)(const char*, int) = nullptr;
  unsigned (*active_)(unsigned*, unsigned) = nullptr;
  unsigned (*calls_)(const char*) = nullptr;
  int (*initialised_)() = nullptr;
};

}  // namespace hostagent::testing
