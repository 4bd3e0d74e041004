// discovery/host_use_parse, private: the kernel's text files that say what the host uses, parsed
// apart from reading them, so each format is tested on its own.
#pragma once

#include <string>
#include <vector>

namespace hostagent::discovery::detail {

struct MountEntry {
  std::string device_number;  // "259:2" (mountinfo's major:minor); "" from /proc/mounts
  std::string source;         // "/dev/nvme0n1p2", "tmpfs"
  std::string mount_point;    // as the kernel escapes it (\040 for a space)
};

// proc_pid_mountinfo(5): "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER".
// Lines that do not have that shape are skipped: the reader is looking for disks, not auditing.
std::vector<MountEntry> parse_mountinfo(const std::string& text);
// fstab(5) order: "SOURCE MOUNTPOINT FSTYPE OPTIONS FREQ PASSNO".
std::vector<MountEntry> parse_mounts(const std::string& text);

// /proc/swaps (mm/swapfile.c swap_show): a header, then "FILENAME TYPE SIZE USED PRIORITY". The
// block devices swapped on ("partition" type); swap files live on a disk already seen as mounted.
std::vector<std::string> parse_swaps(const std::string& text);

struct RouteEntry {
  std::string interface;
  bool is_default = false;  // destination and mask 0.0.0.0
};
// /proc/net/route (net/ipv4/fib_trie.c fib_route_seq_show): a header, then "IFACE DEST GATEWAY
// FLAGS ..." in hex. Only routes that are up (RTF_UP, 0x0001).
std::vector<RouteEntry> parse_routes(const std::string& text);

struct AddressEntry {
  std::string interface;
  std::string address;  // "2001:db8::1" style, lower case, zero groups compressed
};
// /proc/net/if_inet6 (net/ipv6/addrconf.c if6_seq_show): "ADDR32HEX IFINDEX PREFIX SCOPE FLAGS
// NAME". Global and site scope only: every interface that is up has a link-local address, which
// says nothing about the host using it.
std::vector<AddressEntry> parse_if_inet6(const std::string& text);

}  // namespace hostagent::discovery::detail
