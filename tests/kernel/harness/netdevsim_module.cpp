// Real-kernel harness: building netdevsim.ko out of tree (see netdevsim_module.hpp).
#include "netdevsim_module.hpp"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "guest_results.hpp"
#include "test_support.hpp"

namespace hostagent::testing::kernel {
namespace {

namespace fs = std::filesystem;

Error command_failed(const std::vector<std::string>& argv, const CommandResult& result) {
  std::string command;
  for (const auto& word : argv) command += (command.empty() ? "" : " ") + word;
  return Error{ErrorCode::io_error,
               command + " exited with " + std::to_string(result.exit_code) + ":\n" + tail_lines(result.output, 30)};
}

Status run(const std::vector<std::string>& argv) {
  const auto result = run_command(argv);
  if (result.exit_code != 0) return command_failed(argv, result);
  return ok_status();
}

}  // namespace

fs::path netdevsim_cache_dir(const HostPrerequisites& host, const fs::path& fallback) {
  const char* caches = std::getenv("HOSTAGENT_CACHE_DIR");
  const fs::path base = caches != nullptr && *caches != '\0' ? fs::path(caches) / "kernel" : fallback;
  return base / ("netdevsim-" + host.kernel_version);
}

Result<fs::path> netdevsim_module(const HostPrerequisites& host, const fs::path& cache_dir) {
  const fs::path module = cache_dir / "netdevsim.ko";
  std::error_code ec;
  if (fs::exists(module, ec)) return module;
  const fs::path src = cache_dir / "src";
  fs::remove_all(src, ec);
  fs::create_directories(src, ec);
  if (ec) return Error{ErrorCode::io_error, "cannot create " + src.string() + ": " + ec.message()};
  const std::string member = host.source_top + "/drivers/net/netdevsim";
  HA_TRY_STATUS(run({"tar", "-xJf", host.source_tarball.string(), "-C", src.string(), member}));
  const fs::path dir = src / member;
  const unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
  // The driver's Makefile adds bpf.c, ipsec.c and psample.c from the headers' .config, as the
  // kernel's own build does; CONFIG_NETDEVSIM=m is the one option Debian leaves unset.
  HA_TRY_STATUS(run({"make", "-C", host.headers.string(), "M=" + dir.string(), "CONFIG_NETDEVSIM=m",
                     "-j" + std::to_string(jobs), "modules"}));
  HA_TRY_STATUS(run({"strip", "--strip-debug", (dir / "netdevsim.ko").string()}));
  // Copied under a temporary name and renamed: an interrupted build never leaves a half module.
  const fs::path partial = cache_dir / "netdevsim.ko.partial";
  fs::copy_file(dir / "netdevsim.ko", partial, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(partial, module, ec);
  if (ec) return Error{ErrorCode::io_error, "cannot copy netdevsim.ko to " + module.string() + ": " + ec.message()};
  fs::remove_all(src, ec);
  return module;
}

}  // namespace hostagent::testing::kernel
