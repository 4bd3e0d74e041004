// verify/guest_view: the probe's /init and the reader of what it prints (see the header).
#include "hostagent/verify/guest_view.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/verify/guest_image.hpp"
#include "text_fields.hpp"

namespace hostagent::verify {
namespace {

// The line format, version 1:
//   begin version=1
//   node ID cpus=CPULIST mem_kib=N distance=D0,D1,...
//   pci ADDRESS vendor=0xVVVV device=0xDDDD class=0xCCCCCC numa_node=N path=pciDDDD:BB/ADDR/.../ADDRESS
//       max_link=GTS/WIDTH link=GTS/WIDTH
//   seed none reason=WORD | seed mounted vendor_data=ok|failed|none    (only with a seed)
//   file path=PATH sha256=HEX                                          (each file vendor-data put)
//   window bus=DDDD:BB start=0xSTART end=0xEND                         (each host bridge window)
//   end
// distance, max_link, link and window came later within version 1: a line without them reads as
// unknown (no windows: none printed).
// A link is "-" where the function has none (a conventional PCI function, a root complex
// integrated endpoint): the kernel then shows no link attributes.
constexpr std::string_view kVersion = "version=1";

Error malformed(std::size_t line, const std::string& why) {
  return Error{ErrorCode::parse_error, "guest console line " + std::to_string(line) + ": " + why};
}

using detail::split;

// "key=value" words of a line, by key.
std::map<std::string_view, std::string_view> fields(const std::vector<std::string_view>& line, std::size_t first) {
  std::map<std::string_view, std::string_view> out;
  for (std::size_t i = first; i < line.size(); ++i) {
    const auto eq = line[i].find('=');
    if (eq != std::string_view::npos) out[line[i].substr(0, eq)] = line[i].substr(eq + 1);
  }
  return out;
}

class ViewReader {
 public:
  Status line(std::size_t number, std::string_view text) {
    const auto w = split(text, ' ');
    if (w.empty()) return malformed(number, "empty probe line");
    if (w[0] == "begin") return begin(number, w);
    if (!begun_) return malformed(number, "'" + std::string(w[0]) + "' before the probe's begin line");
    if (w[0] == "node") return node(number, w);
    if (w[0] == "pci") return pci(number, w);
    if (w[0] == "seed") return seed(w);
    if (w[0] == "file") return file(number, w);
    if (w[0] == "window") return window(number, w);
    if (w[0] == "end") {
      ended_ = true;
      return ok_status();
    }
    return malformed(number, "unknown probe line '" + std::string(w[0]) + "'");
  }

  Result<GuestView> finish() {
    if (!begun_) {
      return Error{ErrorCode::parse_error,
                   "the guest printed no view (no '" + std::string(kViewPrefix) +
                       "begin' line): it never reached the probe's /init (the console log shows how far it got)"};
    }
    if (!ended_) {
      return Error{ErrorCode::parse_error,
                   "the guest's view stops before its end line: the guest stopped while "
                   "printing it (the console log shows where)"};
    }
    std::sort(view_.nodes.begin(), view_.nodes.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    std::sort(view_.functions.begin(), view_.functions.end(),
              [](const auto& a, const auto& b) { return a.address < b.address; });
    return std::move(view_);
  }

 private:
  Status begin(std::size_t number, const std::vector<std::string_view>& w) {
    if (w.size() != 2 || w[1] != kVersion) {
      return malformed(number, "the probe speaks another version ('" + std::string(w.size() > 1 ? w[1] : "") +
                                   "', expected " + std::string(kVersion) + ")");
    }
    begun_ = true;
    return ok_status();
  }

  Status node(std::size_t number, const std::vector<std::string_view>& w) {
    auto f = fields(w, 2);
    const auto id = w.size() > 1 ? detail::number<int>(w[1], 10) : std::nullopt;
    const auto mem = detail::number<uint64_t>(f["mem_kib"], 10);
    auto cpus = parse_cpu_list(std::string(f["cpus"]));
    if (!id || !mem || !cpus.ok()) return malformed(number, "a node line needs 'node ID cpus=LIST mem_kib=N'");
    GuestNode node{*id, std::move(*cpus), *mem, {}};
    for (const auto d : split(f["distance"], ',')) {
      const auto value = detail::number<int>(d, 10);
      if (!value) return malformed(number, "distance '" + std::string(f["distance"]) + "' is not a list of numbers");
      node.distances.push_back(*value);
    }
    view_.nodes.push_back(std::move(node));
    return ok_status();
  }

  Status pci(std::size_t number, const std::vector<std::string_view>& w) {
    auto f = fields(w, 2);
    auto address = PciAddress::parse(w.size() > 1 ? w[1] : "");
    const auto vendor = detail::number<uint16_t>(f["vendor"], 16);
    const auto device = detail::number<uint16_t>(f["device"], 16);
    const auto class_code = detail::number<uint32_t>(f["class"], 16);
    const auto numa_node = detail::number<int>(f["numa_node"], 10);
    if (!address.ok() || !vendor || !device || !class_code || !numa_node) {
      return malformed(number, "a pci line needs 'pci ADDRESS vendor= device= class= numa_node= path='");
    }
    GuestPciFunction function;
    function.address = *address;
    function.vendor = *vendor;
    function.device = *device;
    function.class_code = *class_code;
    if (*numa_node >= 0) function.numa_node = *numa_node;
    HA_TRY_STATUS(read_path(number, f["path"], function));
    HA_TRY(function.max_link, read_link(number, f["max_link"]));
    HA_TRY(function.link, read_link(number, f["link"]));
    view_.functions.push_back(std::move(function));
    return ok_status();
  }

  Status seed(const std::vector<std::string_view>& w) {
    std::string state;
    for (std::size_t i = 1; i < w.size(); ++i) state += (i > 1 ? " " : "") + std::string(w[i]);
    view_.seed = state;
    return ok_status();
  }

  Status file(std::size_t number, const std::vector<std::string_view>& w) {
    auto f = fields(w, 1);
    if (f["path"].empty() || f["sha256"].size() != 64) {
      return malformed(number, "a file line needs 'file path=PATH sha256=HEX'");
    }
    view_.delivered[std::string(f["path"])] = std::string(f["sha256"]);
    return ok_status();
  }

  Status window(std::size_t number, const std::vector<std::string_view>& w) {
    auto f = fields(w, 1);
    const auto start = detail::number<uint64_t>(f["start"], 16);
    const auto end = detail::number<uint64_t>(f["end"], 16);
    if (f["bus"].empty() || !start || !end || *end < *start) {
      return malformed(number, "a window line needs 'window bus=DDDD:BB start=0xSTART end=0xEND', end >= start");
    }
    view_.windows.push_back(GuestWindow{std::string(f["bus"]), *start, *end});
    return ok_status();
  }

  // "16.0/32" (GT/s, lanes), "-" or absent: none. "Unknown/0" is the kernel's word for a speed
  // field it cannot read (drivers/pci/pci.h pci_speed_string), as QEMU 7.2's xio3130 downstream
  // ports leave Link Capabilities: a port with no link to tell.
  static Result<std::optional<GuestLink>> read_link(std::size_t number, std::string_view text) {
    if (text.empty() || text == "-" || text.starts_with("Unknown/")) return std::optional<GuestLink>{};
    const auto slash = text.find('/');
    const auto width = slash == std::string_view::npos ? std::nullopt : detail::number<int>(text.substr(slash + 1), 10);
    double speed = 0;
    const auto speed_text = text.substr(0, std::min(slash, text.size()));
    const auto [end, ec] = std::from_chars(speed_text.data(), speed_text.data() + speed_text.size(), speed);
    if (!width || ec != std::errc() || end != speed_text.data() + speed_text.size()) {
      return malformed(number, "link '" + std::string(text) + "' is not GTS/WIDTH");
    }
    return std::optional<GuestLink>{GuestLink{speed, *width}};
  }

  // "pci0000:40/0000:40:00.0/0000:41:00.0": the root bus, then each bridge, then the function.
  static Status read_path(std::size_t number, std::string_view path, GuestPciFunction& function) {
    const auto slash = path.find('/');
    const auto root = path.substr(0, slash);
    const auto colon = root.find(':');
    const auto domain = root.starts_with("pci") && colon != std::string_view::npos
                            ? detail::number<uint32_t>(root.substr(3, colon - 3), 16)
                            : std::nullopt;
    const auto bus = colon != std::string_view::npos ? detail::number<int>(root.substr(colon + 1), 16) : std::nullopt;
    if (!domain || !bus || slash == std::string_view::npos) {
      return malformed(number, "path '" + std::string(path) + "' does not start at a root bus (pciDDDD:BB/)");
    }
    function.root_domain = *domain;
    function.root_bus = *bus;
    std::vector<PciAddress> chain;
    for (const auto part : split(path.substr(slash + 1), '/')) {
      auto hop = PciAddress::parse(part);
      if (!hop.ok()) return malformed(number, "path '" + std::string(path) + "' has '" + std::string(part) + "'");
      chain.push_back(*hop);
    }
    if (chain.empty() || chain.back() != function.address) {
      return malformed(number, "path '" + std::string(path) + "' does not end at " + function.address.to_string());
    }
    chain.pop_back();
    function.bridges = std::move(chain);
    return ok_status();
  }

  GuestView view_;
  bool begun_ = false;
  bool ended_ = false;
};

}  // namespace

const GuestPciFunction* GuestView::find(const PciAddress& address) const {
  const auto it = std::lower_bound(functions.begin(), functions.end(), address,
                                   [](const GuestPciFunction& f, const PciAddress& a) { return f.address < a; });
  return it != functions.end() && it->address == address ? &*it : nullptr;
}

Result<GuestView> parse_guest_view(std::string_view console) {
  ViewReader reader;
  std::size_t number = 0;
  std::size_t at = 0;
  while (at < console.size()) {
    const auto end = std::min(console.find('\n', at), console.size());
    auto line = console.substr(at, end - at);
    at = end + 1;
    ++number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    // Firmware may leave escape sequences before the first line: the prefix need not start it.
    const auto prefix = line.find(kViewPrefix);
    if (prefix == std::string_view::npos) continue;
    HA_TRY_STATUS(reader.line(number, line.substr(prefix + kViewPrefix.size())));
  }
  auto view = reader.finish();
  // A guest whose kernel panicked printed no view, or part of one: the panic is the reason.
  if (!view.ok()) {
    if (const auto panic = kernel_panic(console)) {
      return Error{view.error().code, "the guest's kernel panicked (" + *panic + "); " + view.error().message};
    }
  }
  return view;
}

std::string probe_init_script() {
  return R"sh(#!/bin/busybox sh
# /init of hostagent's probe guest (verify, `hostagentctl verify-guest`): PID 1, started by
# the kernel from the initramfs. It prints what this guest's kernel sees of its PCI tree and NUMA
# nodes, one "hostagent-guest-view: " line each (format in src/guest_view.cpp), then powers off.
bb=/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sysfs /sys
say() { echo "hostagent-guest-view: $*" >/dev/console; }
say begin version=1
for node in /sys/devices/system/node/node[0-9]*; do
  [ -d "$node" ] || continue
  # nodeN/meminfo: "Node N MemTotal:  123456 kB"
  # nodeN/distance: the SLIT row, "10 21", in node order
  say node "${node##*node}" cpus="$($bb cat "$node/cpulist")" \
    mem_kib="$($bb awk '$3 == "MemTotal:" { print $4 }' "$node/meminfo")" \
    distance="$($bb tr ' ' ',' < "$node/distance")"
done
# max_link_speed reads "16.0 GT/s PCIe" (6.x; older kernels "16 GT/s"); the attributes exist only
# for functions with a PCI Express link (drivers/pci/pci-sysfs.c pcie_dev_attrs_are_visible).
link() {
  if [ -r "$1/$2_link_speed" ] && [ -r "$1/$2_link_width" ]; then
    echo "$($bb awk '{ print $1 }' "$1/$2_link_speed")/$($bb cat "$1/$2_link_width")"
  else
    echo -
  fi
}
# /sys/bus/pci/devices/X links to /sys/devices/pciDDDD:BB/<bridge>/.../X: the chain of bridges
# from the root bus (pcie.0 or an expander bus) down to the function.
for dev in /sys/bus/pci/devices/*; do
  [ -e "$dev" ] || continue
  path=$($bb readlink -f "$dev")
  say pci "${dev##*/}" vendor="$($bb cat "$dev/vendor")" device="$($bb cat "$dev/device")" \
    class="$($bb cat "$dev/class")" numa_node="$($bb cat "$dev/numa_node")" path="${path#/sys/devices/}" \
    max_link="$(link "$dev" max)" link="$(link "$dev" current)"
done
# Each host bridge's memory windows, as the firmware's ACPI _CRS gave them: /proc/iomem's top
# level, "START-END : PCI Bus DDDD:BB" (PID 1 is root: the addresses are real, not zeroed).
$bb sed -n 's/^\([0-9a-f]*\)-\([0-9a-f]*\) : PCI Bus \([0-9a-f:]*\)$/\3 \1 \2/p' /proc/iomem |
  while read -r bus start end; do say window bus="$bus" start="0x$start" end="0x$end"; done
# With hostagent.seed=1 on the command line the stand-in has the seed as a SATA CD-ROM: mount it,
# run its vendor-data as cloud-init would (busybox's applets standing in for coreutils), and hash
# each file it put.
case " $($bb cat /proc/cmdline) " in *" hostagent.seed=1 "*)
  for module in /lib/modules/*.ko; do [ -e "$module" ] && $bb insmod "$module"; done
  $bb mount -t devtmpfs devtmpfs /dev
  tries=0
  while [ ! -b /dev/sr0 ] && [ "$tries" -lt 150 ]; do $bb usleep 100000; tries=$((tries + 1)); done
  if [ ! -b /dev/sr0 ]; then
    say seed none reason=no-cdrom
  elif ! $bb mount -t iso9660 -o ro /dev/sr0 /seed; then
    say seed none reason=not-mounted
  elif [ ! -f /seed/vendor-data ]; then
    say seed mounted vendor_data=none
  else
    $bb mkdir -p /usr/bin /sbin /usr/sbin
    $bb --install -s
    if PATH=/bin:/sbin:/usr/bin:/usr/sbin $bb sh /seed/vendor-data; then ran=ok; else ran=failed; fi
    say seed mounted vendor_data=$ran
    for file in $($bb sed -n "s/^put '\([^']*\)' .*/\1/p" /seed/vendor-data); do
      [ -f "$file" ] && say file path="$file" sha256="$($bb sha256sum "$file" | $bb awk '{ print $1 }')"
    done
  fi
  ;;
esac
say end
# ACPI power-off: QEMU exits and libvirt reports the domain shut off.
$bb poweroff -f
)sh";
}

}  // namespace hostagent::verify
