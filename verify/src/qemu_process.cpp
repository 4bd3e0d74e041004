// verify/qemu_process: the parsers of /proc's text, the reading, and the check (see the header).
#include "hostagent/verify/qemu_process.hpp"

#include <algorithm>

#include "text_fields.hpp"

namespace hostagent::verify {
namespace {

// The cell of a backend's file: the digits after "ram-node", ended by anything but a digit.
std::optional<int> cell_of_file(std::string_view file) {
  constexpr std::string_view kAlias = "ram-node";
  const auto at = file.find(kAlias);
  if (at == std::string_view::npos) return std::nullopt;
  auto digits = file.substr(at + kAlias.size());
  digits = digits.substr(0, std::min(digits.find_first_not_of("0123456789"), digits.size()));
  return detail::number<int>(digits);
}

// "bind:0-1", "bind=static:0", "prefer:1", "default", "local" (mm/mempolicy.c mpol_to_str).
Status read_policy(std::string_view word, CellMemory& cell) {
  const auto colon = word.find(':');
  auto mode = word.substr(0, colon);
  mode = mode.substr(0, std::min(mode.find('='), mode.size()));
  cell.policy = std::string(mode);
  if (colon == std::string_view::npos) return ok_status();
  HA_TRY(cell.policy_nodes, parse_cpu_list(std::string(word.substr(colon + 1))));
  return ok_status();
}

// One numa_maps line: "ADDRESS POLICY [file=PATH] [huge] [anon=N] [dirty=N] ... [N<node>=PAGES]...
// kernelpagesize_kB=N" (Documentation/filesystems/proc.rst, "numa_maps"); only a backend's.
Result<std::optional<CellMemory>> numa_maps_line(std::string_view line) {
  const auto w = detail::split(line, ' ');
  if (w.size() < 2) return std::optional<CellMemory>();
  std::optional<int> cell;
  for (const auto word : w) {
    if (word.starts_with("file=")) cell = cell_of_file(word.substr(5));
  }
  if (!cell) return std::optional<CellMemory>();
  CellMemory out;
  out.cell = *cell;
  HA_TRY_STATUS(read_policy(w[1], out));
  for (std::size_t i = 2; i < w.size(); ++i) {
    const auto eq = w[i].find('=');
    if (eq == std::string_view::npos) continue;
    const auto key = w[i].substr(0, eq);
    const auto value = w[i].substr(eq + 1);
    if (key == "kernelpagesize_kB") {
      const auto kib = detail::number<int>(value);
      if (!kib) return Error{ErrorCode::parse_error, "numa_maps: kernelpagesize_kB '" + std::string(value) + "'"};
      out.page_kib = static_cast<uint64_t>(*kib);
    } else if (key.size() > 1 && key[0] == 'N') {
      const auto node = detail::number<int>(key.substr(1));
      const auto pages = detail::number<int>(value);
      if (!node || !pages) return Error{ErrorCode::parse_error, "numa_maps: '" + std::string(w[i]) + "'"};
      out.on_node[*node] += static_cast<uint64_t>(*pages);
    }
  }
  return std::optional<CellMemory>(std::move(out));
}

std::string nodes_text(const std::map<int, uint64_t>& on_node, uint64_t page_kib) {
  std::string out;
  for (const auto& [node, pages] : on_node) {
    out += (out.empty() ? "" : ", ") + std::to_string(pages * page_kib / 1024) + " MiB on node " + std::to_string(node);
  }
  return out.empty() ? "no pages present" : out;
}

void check_threads(const StandIn& stand_in, const QemuProcess& process, TiesCheck& out) {
  const auto& ties = stand_in.ties;
  if (!ties.emulator_cpus.empty()) {
    const auto& main = process.threads.front();
    if (main.cpus != ties.emulator_cpus) {
      out.findings.push_back("QEMU's main thread (pid " + std::to_string(process.pid) + ") may run on CPUs " +
                             format_cpu_list(main.cpus) + ", the emulator is pinned to " +
                             format_cpu_list(ties.emulator_cpus));
    } else {
      out.held.push_back("emulator: QEMU's main thread on CPU(s) " + format_cpu_list(main.cpus));
    }
  }
  for (std::size_t vcpu = 0; vcpu < ties.vcpu_cpus.size(); ++vcpu) {
    const auto& want = ties.vcpu_cpus[vcpu];
    const auto* thread = process.vcpu_thread(static_cast<int>(vcpu));
    if (thread == nullptr) {
      out.findings.push_back("vCPU " + std::to_string(vcpu) + ": QEMU has no thread for it");
    } else if (thread->cpus != want) {
      out.findings.push_back("vCPU " + std::to_string(vcpu) + ": its thread (" + thread->name + ") may run on CPUs " +
                             format_cpu_list(thread->cpus) + ", it is pinned to " + format_cpu_list(want));
    } else {
      out.held.push_back("vCPU " + std::to_string(vcpu) + ": its thread on CPU(s) " + format_cpu_list(want));
    }
  }
}

void check_memory(const StandIn& stand_in, const QemuProcess& process, TiesCheck& out) {
  for (const auto& [cell, node] : stand_in.ties.cell_nodes) {
    const auto it = std::find_if(process.cells.begin(), process.cells.end(),
                                 [cell = cell](const CellMemory& m) { return m.cell == cell; });
    const std::string what = "cell " + std::to_string(cell) + "'s memory";
    if (it == process.cells.end()) {
      out.unread.push_back(what + ": anonymous (no hugepage backing), not told apart from QEMU's other mappings");
      continue;
    }
    const std::string where = nodes_text(it->on_node, it->page_kib);
    const bool elsewhere = std::any_of(it->on_node.begin(), it->on_node.end(),
                                       [node = node](const auto& entry) { return entry.first != node; });
    if (it->policy != "bind" || it->policy_nodes != std::vector<int>{node}) {
      const std::string nodes = it->policy_nodes.empty() ? "" : " on node(s) " + format_cpu_list(it->policy_nodes);
      out.findings.push_back(what + ": policy " + it->policy + nodes + ", the stand-in binds it strictly to node " +
                             std::to_string(node));
    } else if (elsewhere) {
      out.findings.push_back(what + " is bound to node " + std::to_string(node) + " but has " + where);
    } else {
      out.held.push_back(what + ": bound to node " + std::to_string(node) + ", " + where);
    }
  }
}

}  // namespace

const QemuThread* QemuProcess::vcpu_thread(int vcpu) const {
  const auto it = std::find_if(threads.begin(), threads.end(),
                               [vcpu](const QemuThread& t) { return vcpu_of_thread(t.name) == vcpu; });
  return it == threads.end() ? nullptr : &*it;
}

bool is_qemu_of(std::string_view cmdline, std::string_view name) {
  bool after_name = false;
  std::size_t at = 0;
  while (at < cmdline.size()) {
    const auto end = std::min(cmdline.find('\0', at), cmdline.size());
    const auto arg = cmdline.substr(at, end - at);
    if (after_name) {
      if (!arg.starts_with("guest=")) return false;
      // QEMU's option syntax: the value runs to the first lone ','; ",," is a comma in it.
      std::string value;
      for (std::size_t i = 6; i < arg.size(); ++i) {
        if (arg[i] != ',') {
          value += arg[i];
        } else if (i + 1 < arg.size() && arg[i + 1] == ',') {
          value += ',';
          ++i;
        } else {
          break;
        }
      }
      return value == name;
    }
    after_name = arg == "-name";
    at = end + 1;
  }
  return false;
}

Result<QemuThread> parse_thread_status(int tid, std::string_view status) {
  QemuThread out;
  out.tid = tid;
  bool has_cpus = false;
  std::size_t at = 0;
  while (at < status.size()) {
    const auto end = std::min(status.find('\n', at), status.size());
    const auto line = status.substr(at, end - at);
    at = end + 1;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto value = line.substr(colon + 1);
    value.remove_prefix(std::min(value.find_first_not_of(" \t"), value.size()));
    if (line.substr(0, colon) == "Name") out.name = std::string(value);
    if (line.substr(0, colon) == "Cpus_allowed_list") {
      HA_TRY(out.cpus, parse_cpu_list(std::string(value)));
      has_cpus = true;
    }
  }
  if (!has_cpus) {
    return Error{ErrorCode::parse_error, "task " + std::to_string(tid) + "'s status has no Cpus_allowed_list"};
  }
  return out;
}

Result<std::vector<CellMemory>> parse_numa_maps(std::string_view numa_maps) {
  std::vector<CellMemory> out;
  std::size_t at = 0;
  while (at < numa_maps.size()) {
    const auto end = std::min(numa_maps.find('\n', at), numa_maps.size());
    HA_TRY(auto cell, numa_maps_line(numa_maps.substr(at, end - at)));
    at = end + 1;
    if (!cell) continue;
    // A backend split into several mappings (one mbind range each) is one cell; parts under
    // different policies are "mixed", which no tie holds.
    const auto same = std::find_if(out.begin(), out.end(), [&](const CellMemory& m) { return m.cell == cell->cell; });
    if (same == out.end()) {
      out.push_back(std::move(*cell));
      continue;
    }
    if (same->policy != cell->policy || same->policy_nodes != cell->policy_nodes) {
      same->policy = "mixed";
      same->policy_nodes.clear();
    }
    for (const auto& [node, pages] : cell->on_node) same->on_node[node] += pages;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.cell < b.cell; });
  return out;
}

std::optional<int> vcpu_of_thread(std::string_view name) {
  if (!name.starts_with("CPU ")) return std::nullopt;
  const auto slash = name.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  return detail::number<int>(name.substr(4, slash - 4));
}

Result<std::optional<QemuProcess>> read_qemu_process(const SysfsRoot& machine, std::string_view name) {
  HA_TRY(const auto entries, machine.list("/proc", false));
  for (const auto& entry : entries) {
    const auto pid = detail::number<int>(entry);
    if (!pid) continue;
    const std::string dir = "/proc/" + entry;
    const auto cmdline = machine.read_binary(dir + "/cmdline");
    if (!cmdline.ok() || !is_qemu_of(*cmdline, name)) continue;  // gone, or another's
    QemuProcess process;
    process.pid = *pid;
    HA_TRY(const auto tasks, machine.list(dir + "/task", false));
    for (const auto& task : tasks) {
      const auto tid = detail::number<int>(task);
      const auto status = machine.read(dir + "/task/" + task + "/status");
      if (!tid || !status.ok()) continue;
      HA_TRY(auto thread, parse_thread_status(*tid, *status));
      process.threads.push_back(std::move(thread));
    }
    std::sort(process.threads.begin(), process.threads.end(), [&](const auto& a, const auto& b) {
      return std::pair(a.tid != *pid, a.tid) < std::pair(b.tid != *pid, b.tid);
    });
    if (process.threads.empty() || process.threads.front().tid != *pid) {
      return Error{ErrorCode::unavailable, "QEMU (pid " + entry + ") ended while its threads were read"};
    }
    HA_TRY(const auto maps, machine.read(dir + "/numa_maps"));
    HA_TRY(process.cells, parse_numa_maps(maps));
    return std::optional<QemuProcess>(std::move(process));
  }
  return std::optional<QemuProcess>();
}

TiesCheck check_ties(const StandIn& stand_in, const QemuProcess& process) {
  TiesCheck out;
  check_threads(stand_in, process, out);
  check_memory(stand_in, process, out);
  return out;
}

}  // namespace hostagent::verify
