// verify/stand_in: rewrites a rendered domain into its bootable stand-in (see the header).
// Everything is done on the parsed document with pugixml; nothing is spliced into XML text.
#include "hostagent/verify/stand_in.hpp"

#include <pugixml.hpp>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <sstream>

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/text.hpp"

namespace hostagent::verify {
namespace {

Error invalid(const std::string& message) {
  return Error{ErrorCode::invalid_argument, "stand-in: " + message};
}

Status check_options(const StandInOptions& options) {
  if (options.name.empty()) return invalid("the stand-in domain needs a name");
  if (options.vcpus_per_cell < 1 || options.vcpus_per_cell > 8) {
    return invalid("vCPUs per cell must be 1-8, not " + std::to_string(options.vcpus_per_cell));
  }
  if (options.memory_per_cell_kib < 64ULL * 1024) return invalid("memory per cell must be at least 64 MiB");
  if (options.hugepage_kib != 0 && options.memory_per_cell_kib % options.hugepage_kib != 0) {
    return invalid("memory per cell (" + std::to_string(options.memory_per_cell_kib) +
                   " KiB) must be a whole number of " + std::to_string(options.hugepage_kib) + " KiB hugepages");
  }
  if (options.domain_type != "qemu" && options.domain_type != "kvm") {
    return invalid("domain type must be qemu (TCG) or kvm, not '" + options.domain_type + "'");
  }
  if (options.machine.phys_address_bits < 36 || options.machine.phys_address_bits > 57) {
    return invalid("the guest's physical address width must be 36-57 bits, not " +
                   std::to_string(options.machine.phys_address_bits));
  }
  for (const auto& node : options.machine.nodes) {
    if (node.cpus.empty()) return invalid("machine node " + std::to_string(node.id) + " has no CPUs");
  }
  if (!options.firmware.empty() && options.firmware != "bios" && options.firmware != "efi") {
    return invalid("firmware must be bios or efi (or unset to keep the rendered domain's), not '" + options.firmware +
                   "'");
  }
  return ok_status();
}

void set_text(pugi::xml_node node, const std::string& text) {
  node.text().set(text.c_str());
}

void remove_all(pugi::xml_node parent, const char* name) {
  while (auto child = parent.child(name)) parent.remove_child(child);
}

class StandInWriter {
 public:
  StandInWriter(pugi::xml_document& doc, const StandInOptions& options)
      : domain_(doc.child("domain")), options_(options) {}

  Result<StandIn> write() {
    HA_TRY_STATUS(rewrite_cells());
    rewrite_header();
    keep_host_ties();
    rewrite_os();
    HA_TRY_STATUS(rewrite_devices());
    drop_device_overrides();
    std::ostringstream xml;
    domain_.root().print(xml, "  ", pugi::format_indent | pugi::format_no_declaration);
    out_.domain_xml = xml.str();
    std::sort(out_.devices.begin(), out_.devices.end(),
              [](const auto& a, const auto& b) { return a.libvirt_address < b.libvirt_address; });
    return std::move(out_);
  }

 private:
  // Guest cell c gets vCPUs [c*k, c*k+k) and the scaled memory; its distances stay.
  Status rewrite_cells() {
    auto cpu = domain_.child("cpu");
    auto cells = cpu.child("numa");
    if (!cells.child("cell")) return invalid("the rendered domain has no guest NUMA cells (<cpu><numa><cell>)");
    const int k = options_.vcpus_per_cell;
    for (auto cell : cells.children("cell")) {
      StandInCell out{cell.attribute("id").as_int(), {}, options_.memory_per_cell_kib};
      for (int i = 0; i < k; ++i) out.cpus.push_back(out.id * k + i);
      cell.attribute("cpus").set_value(format_cpu_list(out.cpus).c_str());
      cell.attribute("memory").set_value(std::to_string(out.memory_kib).c_str());
      if (auto unit = cell.attribute("unit")) unit.set_value("KiB");
      out_.cells.push_back(std::move(out));
    }
    std::sort(out_.cells.begin(), out_.cells.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    const auto n = static_cast<int>(out_.cells.size());
    if (out_.cells.front().id != 0 || out_.cells.back().id != n - 1) {
      return invalid("the rendered domain's cells are not numbered 0-" + std::to_string(n - 1));
    }
    rewrite_cpu(cpu, n * k);
    change("vCPUs and memory scaled to " + std::to_string(k) + " vCPU(s) and " +
           std::to_string(options_.memory_per_cell_kib / 1024) + " MiB per guest cell, " + std::to_string(n) +
           " cell(s)");
    return ok_status();
  }

  // TCG has no host CPU to pass through, nor host physical address bits.
  void rewrite_cpu(pugi::xml_node cpu, int vcpus) {
    if (options_.domain_type == "qemu") {
      for (const char* attribute : {"mode", "check", "migratable", "match"}) cpu.remove_attribute(attribute);
      cpu.prepend_attribute("mode").set_value("maximum");
      remove_all(cpu, "maxphysaddr");
      remove_all(cpu, "model");
      remove_all(cpu, "feature");
      change("CPU model: QEMU's maximum for TCG instead of host-passthrough");
    }
    auto topology = cpu.child("topology");
    if (!topology) topology = cpu.prepend_child("topology");
    for (const char* attribute : {"sockets", "dies", "clusters", "cores", "threads"}) {
      topology.remove_attribute(attribute);
    }
    topology.append_attribute("sockets").set_value(1);
    topology.append_attribute("cores").set_value(vcpus);
    topology.append_attribute("threads").set_value(1);
    auto vcpu = domain_.child("vcpu");
    vcpu.remove_attribute("current");
    set_text(vcpu, std::to_string(vcpus));
  }

  void rewrite_header() {
    domain_.attribute("type").set_value(options_.domain_type.c_str());
    set_text(domain_.child("name"), options_.name);
    domain_.remove_child("uuid");
    // The daemon adopts domains that carry its metadata; a stand-in is none of its VMs.
    domain_.remove_child("metadata");
    domain_.remove_child("description");
    auto description = domain_.insert_child_after("description", domain_.child("name"));
    set_text(description, "hostagent verify-guest stand-in: boots, prints its PCI tree and powers off");
    uint64_t total = 0;
    for (const auto& cell : out_.cells) total += cell.memory_kib;
    for (const char* name : {"memory", "currentMemory"}) {
      if (auto node = domain_.child(name)) {
        node.remove_attribute("unit");
        node.append_attribute("unit").set_value("KiB");
        set_text(node, std::to_string(total));
      }
    }
    // panic=-1 reboots the guest on a panic; ending the domain then ends the check with its log.
    set_text(domain_.child("on_reboot"), "destroy");
  }

  void keep_host_ties() {
    rewrite_hugepages();
    if (options_.machine.nodes.empty()) {
      for (const char* name : {"cputune", "numatune"}) {
        if (!domain_.child(name)) continue;
        remove_all(domain_, name);
        change(std::string(name) + " dropped: this machine's NUMA nodes and CPUs were not given");
      }
      return;
    }
    out_.ties.cell_nodes = machine_nodes_of_cells();
    if (auto numatune = domain_.child("numatune")) rewrite_numatune(numatune);
    if (auto cputune = domain_.child("cputune")) rewrite_cputune(cputune);
  }

  // The rendered cells' host nodes (numatune's memnodes), in order, onto this machine's nodes in
  // turn; a cell without a memnode takes the node of its own index.
  std::map<int, int> machine_nodes_of_cells() const {
    const auto& nodes = options_.machine.nodes;
    std::map<int, int> host_of_cell;
    std::set<int> host_nodes;
    for (auto memnode : domain_.child("numatune").children("memnode")) {
      const auto listed = parse_cpu_list(memnode.attribute("nodeset").value());
      if (!listed.ok() || listed->empty()) continue;
      host_of_cell[memnode.attribute("cellid").as_int()] = listed->front();
      host_nodes.insert(listed->front());
    }
    std::map<int, int> machine_of_host;
    for (const int host : host_nodes) {
      machine_of_host[host] = nodes[machine_of_host.size() % nodes.size()].id;
    }
    std::map<int, int> out;
    for (const auto& cell : out_.cells) {
      const auto host = host_of_cell.find(cell.id);
      out[cell.id] = host != host_of_cell.end() ? machine_of_host[host->second]
                                                : nodes[static_cast<std::size_t>(cell.id) % nodes.size()].id;
    }
    return out;
  }

  void rewrite_numatune(pugi::xml_node numatune) {
    std::vector<int> used;
    for (const auto& [cell, node] : out_.ties.cell_nodes) used.push_back(node);
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    while (auto child = numatune.first_child()) numatune.remove_child(child);
    auto memory = numatune.append_child("memory");
    memory.append_attribute("mode").set_value("strict");
    memory.append_attribute("nodeset").set_value(format_cpu_list(used).c_str());
    for (const auto& [cell, node] : out_.ties.cell_nodes) {
      auto memnode = numatune.append_child("memnode");
      memnode.append_attribute("cellid").set_value(cell);
      memnode.append_attribute("mode").set_value("strict");
      memnode.append_attribute("nodeset").set_value(node);
    }
    change("memory bound strictly per cell, on this machine's node(s) " + format_cpu_list(used) +
           " in place of the host's");
  }

  void rewrite_cputune(pugi::xml_node cputune) {
    const bool pins_vcpus = static_cast<bool>(cputune.child("vcpupin"));
    const bool pins_emulator = static_cast<bool>(cputune.child("emulatorpin"));
    for (const char* name : {"vcpupin", "emulatorpin", "iothreadpin"}) remove_all(cputune, name);
    const auto& nodes = options_.machine.nodes;
    if (pins_emulator) out_.ties.emulator_cpus = {nodes.front().cpus.front()};
    if (pins_vcpus) {
      std::map<int, std::size_t> vcpus_on_node;
      for (const auto& cell : out_.cells) vcpus_on_node[out_.ties.cell_nodes[cell.id]] += cell.cpus.size();
      for (const auto& cell : out_.cells) {
        const int id = out_.ties.cell_nodes[cell.id];
        const auto& node = *std::find_if(nodes.begin(), nodes.end(), [&](const MachineNode& n) { return n.id == id; });
        // Off the emulator's CPU only where the node keeps a CPU per vCPU: a TCG vCPU thread is
        // busy, and two on one CPU take about half again as long to boot (measured: 45.9 s
        // against 29.1 s for the Vela-2 stand-in on a 2-CPU machine).
        std::vector<int> cpus;
        std::set_difference(node.cpus.begin(), node.cpus.end(), out_.ties.emulator_cpus.begin(),
                            out_.ties.emulator_cpus.end(), std::back_inserter(cpus));
        if (cpus.size() < vcpus_on_node[id]) cpus = node.cpus;
        for (const int vcpu : cell.cpus) {
          auto pin = cputune.append_child("vcpupin");
          pin.append_attribute("vcpu").set_value(vcpu);
          pin.append_attribute("cpuset").set_value(format_cpu_list(cpus).c_str());
          out_.ties.vcpu_cpus.resize(std::max<std::size_t>(out_.ties.vcpu_cpus.size(), vcpu + 1));
          out_.ties.vcpu_cpus[static_cast<std::size_t>(vcpu)] = cpus;
        }
      }
    }
    if (pins_emulator) {
      cputune.append_child("emulatorpin")
          .append_attribute("cpuset")
          .set_value(format_cpu_list(out_.ties.emulator_cpus).c_str());
    }
    if (!cputune.first_child()) domain_.remove_child(cputune);
    change(std::string("pinning kept on this machine's CPUs:") + (pins_vcpus ? " each vCPU on its cell's node" : "") +
           (pins_emulator ? ", the emulator on CPU " + format_cpu_list(out_.ties.emulator_cpus) : ""));
  }

  // The rendered per-cell page elements stay, with this machine's page size: the guest's memory
  // is still hugepage-backed per cell, as rendered.
  void rewrite_hugepages() {
    auto backing = domain_.child("memoryBacking");
    if (!backing) return;
    if (options_.hugepage_kib == 0) {
      domain_.remove_child(backing);
      change("hugepage backing dropped (no page size with room on this machine, or --hugepages none)");
      return;
    }
    const std::string size = std::to_string(options_.hugepage_kib);
    for (auto page : backing.child("hugepages").children("page")) {
      page.attribute("size").set_value(size.c_str());
      if (auto unit = page.attribute("unit")) unit.set_value("KiB");
    }
    change("hugepages of " + size + " KiB back the cells");
  }

  void rewrite_os() {
    auto os = domain_.child("os");
    for (const char* name : {"kernel", "initrd", "cmdline", "boot", "loader", "nvram", "smbios"}) remove_all(os, name);
    if (options_.firmware == "bios") {
      os.remove_attribute("firmware");
      change("firmware: BIOS (SeaBIOS) instead of the rendered domain's");
    } else if (options_.firmware == "efi") {
      os.remove_attribute("firmware");
      os.append_attribute("firmware").set_value("efi");
    }
    set_text(os.append_child("kernel"), options_.image.kernel.string());
    set_text(os.append_child("initrd"), options_.image.initrd.string());
    set_text(os.append_child("cmdline"), options_.image.cmdline);
    change("boots the probe kernel directly: " + options_.image.kernel.string());
  }

  Status rewrite_devices() {
    auto devices = domain_.child("devices");
    std::vector<pugi::xml_node> replace;
    for (auto device : devices.children()) {
      const std::string name = device.name();
      const bool passthrough =
          name == "hostdev" || (name == "interface" && std::string(device.attribute("type").value()) == "hostdev");
      if (passthrough || name == "disk" || name == "serial" || name == "console") replace.push_back(device);
    }
    for (auto device : replace) HA_TRY_STATUS(replace_device(devices, device));
    for (auto controller : devices.children("controller")) {
      if (auto hole = controller.child("pcihole64")) HA_TRY_STATUS(resize_pcihole64(hole));
    }
    auto serial = devices.append_child("serial");
    serial.append_attribute("type").set_value("file");
    serial.append_child("source").append_attribute("path").set_value(options_.console_log.string().c_str());
    serial.append_child("target").append_attribute("port").set_value(0);
    if (!options_.seed_iso.empty()) append_seed(devices);
    change(std::to_string(out_.devices.size()) +
           " passthrough devices and disks replaced by virtio-rng at their "
           "guest addresses");
    return ok_status();
  }

  // pcie-root's 64-bit MMIO hole, at most half the guest's address space: QEMU puts it above the
  // guest's RAM (at 4 GiB here: a stand-in's RAM is below it) and refuses one that ends past the
  // address width. The fw_cfg file OVMF sizes its aperture by follows it (render's -fw_cfg).
  Status resize_pcihole64(pugi::xml_node hole) {
    HA_TRY(const auto rendered, bytes_of(hole));
    const uint64_t most = uint64_t{1} << (options_.machine.phys_address_bits - 1);
    const uint64_t size = std::min(rendered, most);
    hole.remove_attribute("unit");
    hole.append_attribute("unit").set_value("KiB");
    set_text(hole, std::to_string(size / 1024));
    out_.ties.pcihole64_bytes = size;
    constexpr std::string_view kOvmfAperture = "name=opt/ovmf/X-PciMmio64Mb,string=";
    for (auto arg : domain_.child("qemu:commandline").children("qemu:arg")) {
      if (std::string_view(arg.attribute("value").value()).starts_with(kOvmfAperture)) {
        arg.attribute("value").set_value((std::string(kOvmfAperture) + std::to_string(size >> 20)).c_str());
      }
    }
    const auto gib = [](uint64_t bytes) { return std::to_string(bytes >> 30) + " GiB"; };
    change(size == rendered ? "pcie-root's 64-bit MMIO hole kept: " + gib(size)
                            : "pcie-root's 64-bit MMIO hole sized from " + gib(rendered) + " to " + gib(size) +
                                  ", half of what the guest's " + std::to_string(options_.machine.phys_address_bits) +
                                  "-bit physical addresses reach");
    return ok_status();
  }

  // A libvirt size: its text in the element's unit (text::libvirt_bytes).
  static Result<uint64_t> bytes_of(pugi::xml_node element) {
    const std::string_view text = element.text().get();
    const std::string_view unit = element.attribute("unit").value();
    const auto bytes = text::libvirt_bytes(text, unit);
    if (!bytes) {
      return invalid("<" + std::string(element.name()) + "> is not a size: '" + std::string(text) + "' " +
                     std::string(unit.empty() ? "KiB" : unit));
    }
    return *bytes;
  }

  // The seed as the daemon attaches it (render/domain_devices.cpp): a read-only SATA CD-ROM on q35's
  // own AHCI controller, so the probe reads the delivered files where a real guest would.
  void append_seed(pugi::xml_node devices) {
    auto cdrom = devices.append_child("disk");
    cdrom.append_attribute("type").set_value("file");
    cdrom.append_attribute("device").set_value("cdrom");
    auto driver = cdrom.append_child("driver");
    driver.append_attribute("name").set_value("qemu");
    driver.append_attribute("type").set_value("raw");
    cdrom.append_child("source").append_attribute("file").set_value(options_.seed_iso.string().c_str());
    auto target = cdrom.append_child("target");
    target.append_attribute("dev").set_value("sda");
    target.append_attribute("bus").set_value("sata");
    cdrom.append_child("readonly");
    change("the seed with the guest's NCCL files attached as a SATA CD-ROM: " + options_.seed_iso.string());
  }

  Status replace_device(pugi::xml_node devices, pugi::xml_node device) {
    const std::string kind = device.name();
    const auto address = device.child("address");
    if (kind != "serial" && kind != "console" && std::string(address.attribute("type").value()) == "pci") {
      HA_TRY(const auto libvirt_address, pci_address_of(address));
      auto rng = devices.insert_child_before("rng", device);
      rng.append_attribute("model").set_value("virtio");
      auto backend = rng.append_child("backend");
      backend.append_attribute("model").set_value("random");
      set_text(backend, "/dev/urandom");
      const std::string alias = device.child("alias").attribute("name").value();
      if (!alias.empty()) rng.append_child("alias").append_attribute("name").set_value(alias.c_str());
      rng.append_copy(address);
      out_.devices.push_back(StandInDevice{libvirt_address, kind, alias});
    }
    devices.remove_child(device);
    return ok_status();
  }

  // <qemu:override> sets vfio-pci properties (x-nv-gpudirect-clique) on the rendered GPUs by
  // alias; virtio-rng has none of them, and QEMU refuses an unknown property.
  void drop_device_overrides() {
    std::set<std::string> aliases;
    for (const auto& device : out_.devices) aliases.insert(device.alias);
    auto overrides = domain_.child("qemu:override");
    std::vector<pugi::xml_node> dropped;
    for (auto device : overrides.children("qemu:device")) {
      if (aliases.count(device.attribute("alias").value()) != 0) dropped.push_back(device);
    }
    for (auto device : dropped) overrides.remove_child(device);
    if (overrides && !overrides.first_child()) domain_.remove_child(overrides);
    if (!dropped.empty()) {
      change("QEMU property overrides of " + std::to_string(dropped.size()) +
             " replaced device(s) dropped (vfio-pci's, e.g. x-nv-gpudirect-clique)");
    }
  }

  // libvirt writes address fields as hex ("0x1a"); decimal is accepted too, as libvirt does.
  static Result<PciAddress> pci_address_of(pugi::xml_node address) {
    const auto field = [&](const char* name, unsigned max) -> std::optional<unsigned> {
      std::string_view text = address.attribute(name).value();
      int base = 10;
      if (text.starts_with("0x")) {
        text.remove_prefix(2);
        base = 16;
      }
      unsigned value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty() || value > max) return std::nullopt;
      return value;
    };
    const auto domain = field("domain", 0xffff), bus = field("bus", 0xff), slot = field("slot", 0x1f),
               function = field("function", 7);
    if (!domain || !bus || !slot || !function) {
      return invalid("a device's guest <address> is not a PCI address: bus '" +
                     std::string(address.attribute("bus").value()) + "', slot '" + address.attribute("slot").value() +
                     "'");
    }
    return PciAddress{*domain, static_cast<uint8_t>(*bus), static_cast<uint8_t>(*slot),
                      static_cast<uint8_t>(*function)};
  }

  void change(std::string what) { out_.changes.push_back(std::move(what)); }

  pugi::xml_node domain_;
  const StandInOptions& options_;
  StandIn out_;
};

}  // namespace

Result<std::optional<uint64_t>> hugepage_size_with_room(const SysfsRoot& machine, uint64_t wanted_kib,
                                                        uint64_t total_kib) {
  // One directory per page size the kernel supports: hugepages-2048kB, hugepages-1048576kB
  // (Documentation/admin-guide/mm/hugetlbpage.rst), each with its free_hugepages count.
  const std::string dir = "/sys/kernel/mm/hugepages";
  HA_TRY(const auto sizes, machine.list(dir, true));
  std::optional<uint64_t> best;
  for (const auto& name : sizes) {
    if (!name.starts_with("hugepages-") || !name.ends_with("kB")) continue;
    uint64_t kib = 0;
    const auto digits = std::string_view(name).substr(10, name.size() - 12);
    if (std::from_chars(digits.data(), digits.data() + digits.size(), kib).ec != std::errc() || kib == 0) continue;
    HA_TRY(const auto free_pages, machine.read_int(dir + "/" + name + "/free_hugepages"));
    if (total_kib % kib != 0 || static_cast<uint64_t>(free_pages) * kib < total_kib) continue;
    if (kib == wanted_kib) return std::optional<uint64_t>(kib);
    if (!best || kib > *best) best = kib;
  }
  return best;
}

Result<StandInMachine> read_machine(const SysfsRoot& machine, int phys_address_bits) {
  StandInMachine out;
  out.phys_address_bits = phys_address_bits;
  // One directory per node the kernel knows, its CPUs in cpulist (Documentation/ABI/stable/
  // sysfs-devices-node); a node of memory alone lists none.
  const std::string dir = "/sys/devices/system/node";
  HA_TRY(const auto entries, machine.list(dir, true));
  for (const auto& name : entries) {
    int id = 0;
    if (!name.starts_with("node") ||
        std::from_chars(name.data() + 4, name.data() + name.size(), id).ptr != name.data() + name.size()) {
      continue;
    }
    HA_TRY(const auto text, machine.read(dir + "/" + name + "/cpulist"));
    HA_TRY(auto cpus, parse_cpu_list(text));
    if (!cpus.empty()) out.nodes.push_back(MachineNode{id, std::move(cpus)});
  }
  if (out.nodes.empty()) {
    HA_TRY(const auto online, machine.read("/sys/devices/system/cpu/online"));
    HA_TRY(auto cpus, parse_cpu_list(online));
    out.nodes.push_back(MachineNode{0, std::move(cpus)});
  }
  std::sort(out.nodes.begin(), out.nodes.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

bool is_stand_in_id(uint16_t vendor, uint16_t device) {
  return vendor == kStandInVendor && (device == 0x1005 || device == 0x1044);
}

Result<StandIn> make_stand_in(std::string_view rendered_domain_xml, const StandInOptions& options) {
  HA_TRY_STATUS(check_options(options));
  pugi::xml_document doc;
  const auto parsed = doc.load_buffer(rendered_domain_xml.data(), rendered_domain_xml.size());
  if (!parsed) return invalid(std::string("the rendered domain is not XML: ") + parsed.description());
  if (!doc.child("domain")) return invalid("the rendered XML has no <domain> element");
  return StandInWriter(doc, options).write();
}

}  // namespace hostagent::verify
