// state/domain_holdings: a foreign domain's pins, passthrough functions and hugepages, from its XML
// as libvirt writes it (docs: formatdomain.html, "CPU Tuning", "Memory Backing", "NUMA Node
// Tuning", "Host device assignment").
#include "hostagent/state/domain_holdings.hpp"

#include <pugixml.hpp>

#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/text.hpp"
#include "record_checks.hpp"

namespace hostagent::state {
namespace {

// A hex number as libvirt writes a PCI address's parts ("0x3f"), the whole text.
std::optional<uint64_t> hex_number(std::string_view text) {
  if (text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0) text.remove_prefix(2);
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Error unreadable(const std::string& name, const std::string& what) {
  return Error{ErrorCode::parse_error, "domain " + name + ": " + what};
}

// libvirt's cpuset: cpulist items, and "^N" items that take CPUs out (virBitmapParse).
Result<std::set<int>> read_cpuset(const std::string& name, const std::string& where, const std::string& text) {
  std::set<int> in;
  std::set<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    const bool exclude = !item.empty() && item.front() == '^';
    const auto read = read_cpu_list(exclude ? item.substr(1) : item);
    if (!read.cpus) return unreadable(name, where + " cpuset " + text::quoted(text) + ": " + read.why);
    (exclude ? out : in).insert(read.cpus->begin(), read.cpus->end());
  }
  for (const int cpu : out) in.erase(cpu);
  return in;
}

// A size with libvirt's units (text::libvirt_bytes).
Result<uint64_t> read_bytes(const std::string& name, const std::string& where, const std::string& value,
                            pugi::xml_attribute unit) {
  const std::string unit_text = unit ? unit.as_string() : "KiB";
  const auto bytes = text::libvirt_bytes(value, unit_text);
  if (!bytes) {
    return unreadable(
        name, where + ": " + text::quoted(value) + " " + text::quoted(unit_text) + " is not a size libvirt writes");
  }
  return *bytes;
}

Status read_cpus(const std::string& name, pugi::xml_node domain, DomainHoldings& out) {
  std::set<int> cpus;
  const auto cputune = domain.child("cputune");
  std::size_t pinned_vcpus = 0;
  for (const auto* pin : {"vcpupin", "emulatorpin", "iothreadpin"}) {
    for (const auto element : cputune.children(pin)) {
      HA_TRY(const auto set, read_cpuset(name, pin, element.attribute("cpuset").as_string()));
      cpus.insert(set.begin(), set.end());
      if (std::string_view(pin) == "vcpupin") ++pinned_vcpus;
    }
  }
  const auto vcpu = domain.child("vcpu");
  const auto vcpus = detail::parse_unsigned(vcpu.text().as_string());
  if (pinned_vcpus < vcpus.value_or(1)) {
    if (const auto set = vcpu.attribute("cpuset")) {
      HA_TRY(const auto floating, read_cpuset(name, "vcpu", set.as_string()));
      cpus.insert(floating.begin(), floating.end());
    } else {
      out.uncounted.push_back("its vCPUs are not pinned: they may run on any CPU, hostagent's VMs' included");
    }
  }
  out.allocation.cpus.assign(cpus.begin(), cpus.end());
  return ok_status();
}

Status read_devices(const std::string& name, pugi::xml_node domain, DomainHoldings& out) {
  for (const auto hostdev : domain.child("devices").children("hostdev")) {
    if (std::string_view(hostdev.attribute("mode").as_string()) != "subsystem" ||
        std::string_view(hostdev.attribute("type").as_string()) != "pci") {
      continue;
    }
    const auto at = hostdev.child("source").child("address");
    const auto domain_part = hex_number(at.attribute("domain").as_string());
    const auto bus = hex_number(at.attribute("bus").as_string());
    const auto slot = hex_number(at.attribute("slot").as_string());
    const auto function = hex_number(at.attribute("function").as_string());
    if (!domain_part || !bus || !slot || !function || *domain_part > UINT32_MAX || *bus > 0xff || *slot > 0x1f ||
        *function > 7) {
      return unreadable(name, "a hostdev's source address (domain " + text::quoted(at.attribute("domain").as_string()) +
                                  ", bus " + text::quoted(at.attribute("bus").as_string()) + ", slot " +
                                  text::quoted(at.attribute("slot").as_string()) + ", function " +
                                  text::quoted(at.attribute("function").as_string()) + ") is not a PCI address");
    }
    out.allocation.devices.push_back(PciAddress{static_cast<uint32_t>(*domain_part), static_cast<uint8_t>(*bus),
                                                static_cast<uint8_t>(*slot), static_cast<uint8_t>(*function)});
  }
  return ok_status();
}

// Pages spread over the nodes of a nodeset, the remainder on the first.
void spread(uint64_t pages, const std::set<int>& nodes, std::map<int, uint64_t>& out) {
  if (nodes.empty()) return;
  for (const int node : nodes) out[node] += pages / nodes.size();
  out[*nodes.begin()] += pages % nodes.size();
}

Status read_hugepages(const std::string& name, pugi::xml_node domain, uint64_t default_page_bytes,
                      DomainHoldings& out) {
  const auto hugepages = domain.child("memoryBacking").child("hugepages");
  if (!hugepages) return ok_status();
  uint64_t page = default_page_bytes;
  if (const auto size = hugepages.child("page")) {
    HA_TRY(page, read_bytes(name, "hugepages page", size.attribute("size").as_string(), size.attribute("unit")));
  }
  if (page == 0) return unreadable(name, "hugepages page size is 0");
  out.allocation.hugepage_size_bytes = page;
  const auto numatune = domain.child("numatune");
  std::map<int, uint64_t> cells;  // guest cell -> bytes
  for (const auto cell : domain.child("cpu").child("numa").children("cell")) {
    HA_TRY(cells[cell.attribute("id").as_int()],
           read_bytes(name, "numa cell", cell.attribute("memory").as_string(), cell.attribute("unit")));
  }
  bool bound = false;
  for (const auto memnode : numatune.children("memnode")) {
    HA_TRY(const auto nodes, read_cpuset(name, "memnode", memnode.attribute("nodeset").as_string()));
    spread(cells[memnode.attribute("cellid").as_int()] / page, nodes, out.allocation.hugepages);
    cells.erase(memnode.attribute("cellid").as_int());
    bound = true;
  }
  if (const auto nodeset = numatune.child("memory").attribute("nodeset"); nodeset) {
    HA_TRY(const auto nodes, read_cpuset(name, "numatune memory", nodeset.as_string()));
    uint64_t rest = 0;
    if (bound) {
      for (const auto& [cell, bytes] : cells) rest += bytes;
    } else {
      const auto memory = domain.child("memory");
      HA_TRY(rest, read_bytes(name, "memory", memory.text().as_string(), memory.attribute("unit")));
    }
    spread(rest / page, nodes, out.allocation.hugepages);
    bound = true;
  }
  if (!bound) {
    out.uncounted.push_back(
        "its hugepages are bound to no host node (no <numatune>): the kernel takes them from "
        "any node, and they are not counted against one");
  }
  return ok_status();
}

}  // namespace

Result<DomainHoldings> domain_holdings(const std::string& name, const std::string& domain_xml,
                                       uint64_t default_page_bytes) {
  pugi::xml_document document;
  if (const auto parsed = document.load_string(domain_xml.c_str()); !parsed) {
    return unreadable(name, std::string("its XML does not parse: ") + parsed.description());
  }
  const auto domain = document.child("domain");
  if (!domain) return unreadable(name, "its XML has no <domain> element");
  DomainHoldings out;
  out.allocation.vm = name;
  HA_TRY_STATUS(read_cpus(name, domain, out));
  HA_TRY_STATUS(read_devices(name, domain, out));
  HA_TRY_STATUS(read_hugepages(name, domain, default_page_bytes, out));
  return out;
}

}  // namespace hostagent::state
