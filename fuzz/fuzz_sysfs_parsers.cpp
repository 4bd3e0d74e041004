// libFuzzer target: arbitrary bytes as what the kernel's files hold, through each parser discovery
// and the host-use reader apply to them (the first byte picks the parser): a PCI address, a cpulist,
// an AER counter file, /proc/self/mountinfo, /proc/mounts, /proc/swaps, /proc/net/route and
// /proc/net/if_inet6. A file a broken driver or a hostile container writes must be refused or read,
// never crash the daemon. Besides the sanitizers, it checks that what a parser accepts is what the
// kernel could have written: an address that prints back the same, a cpulist of ascending ids.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "host_use_parse.hpp"
#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/discovery/device_health_reader.hpp"

namespace {

using namespace hostagent;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_sysfs_parsers: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 8) {
    case 0: {
      const auto address = PciAddress::parse(text);
      if (address.ok() && PciAddress::parse(address->to_string()).value() != *address) {
        broken("an address that does not print back as itself");
      }
      break;
    }
    case 1: {
      const auto cpus = parse_cpu_list(text);
      if (cpus.ok()) {
        for (std::size_t i = 1; i < cpus->size(); ++i) {
          if ((*cpus)[i] <= (*cpus)[i - 1]) broken("a cpulist not ascending");
        }
      }
      break;
    }
    case 2:
      (void)discovery::parse_aer_counters(text, "aer_dev_correctable");
      break;
    case 3:
      (void)discovery::detail::parse_mountinfo(text);
      break;
    case 4:
      (void)discovery::detail::parse_mounts(text);
      break;
    case 5:
      (void)discovery::detail::parse_swaps(text);
      break;
    case 6:
      (void)discovery::detail::parse_routes(text);
      break;
    default:
      (void)discovery::detail::parse_if_inet6(text);
  }
  return 0;
}
