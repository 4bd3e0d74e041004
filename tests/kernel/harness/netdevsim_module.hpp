// Real-kernel harness: netdevsim.ko, the simulated netdevs whose VFs the guest configures over
// netlink. Debian's kernel does not ship it (CONFIG_NETDEVSIM is not set), so it is built out of tree
// from Debian's own source of that kernel (linux-source-X.Y) against its headers, once per kernel
// version, into the caches that outlive a clone (scripts/lib/caches.sh).
#pragma once

#include <filesystem>

#include "host_prerequisites.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::testing::kernel {

// The module's directory: $HOSTAGENT_CACHE_DIR/kernel/netdevsim-VERSION, or, without
// HOSTAGENT_CACHE_DIR, fallback/netdevsim-VERSION.
std::filesystem::path netdevsim_cache_dir(const HostPrerequisites& host, const std::filesystem::path& fallback);

// cache_dir/netdevsim.ko when it is there; otherwise extracts drivers/net/netdevsim from the source
// tarball into cache_dir/src, runs `make -C HEADERS M=... CONFIG_NETDEVSIM=m modules` and strips
// its debug information (5 MB of the 5.5). The error carries make's output.
Result<std::filesystem::path> netdevsim_module(const HostPrerequisites& host, const std::filesystem::path& cache_dir);

}  // namespace hostagent::testing::kernel
