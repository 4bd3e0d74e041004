// virt/domain_stats: every domain's figures in one virConnectGetAllDomainStats, read from libvirt's
// typed parameters by their documented names (docs: virConnectGetAllDomainStats, "Domain stats").
#include <libvirt/virterror.h>

#include <array>
#include <charconv>
#include <map>

#include "handles.hpp"
#include "libvirt_error.hpp"
#include "libvirt_hypervisor.hpp"

namespace hostagent::virt {
namespace {

std::optional<uint64_t> as_unsigned(const StatField& field) {
  if (const auto* u = std::get_if<uint64_t>(&field.value)) return *u;
  if (const auto* i = std::get_if<int64_t>(&field.value); i != nullptr && *i >= 0) return static_cast<uint64_t>(*i);
  return std::nullopt;
}

// "block.3.rd.bytes" -> (3, "rd.bytes") for prefix "block."; nullopt when it is not an indexed field.
std::optional<std::pair<std::size_t, std::string_view>> indexed(std::string_view field, std::string_view prefix) {
  if (!field.starts_with(prefix)) return std::nullopt;
  field.remove_prefix(prefix.size());
  std::size_t index = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), index);
  if (error != std::errc() || end == field.data() + field.size() || *end != '.' || index > 4096) return std::nullopt;
  return std::pair{index, field.substr(static_cast<std::size_t>(end - field.data()) + 1)};
}

// Each indexed group's counters by libvirt's name for them, after "block.N." or "net.N.".
template <class T>
using Counters = std::array<std::pair<std::string_view, uint64_t T::*>, 4>;
constexpr Counters<BlockStats> kBlockCounters{{{"rd.bytes", &BlockStats::read_bytes},
                                               {"wr.bytes", &BlockStats::write_bytes},
                                               {"rd.reqs", &BlockStats::read_requests},
                                               {"wr.reqs", &BlockStats::write_requests}}};
constexpr Counters<NetStats> kNetCounters{{{"rx.bytes", &NetStats::rx_bytes},
                                           {"tx.bytes", &NetStats::tx_bytes},
                                           {"rx.pkts", &NetStats::rx_packets},
                                           {"tx.pkts", &NetStats::tx_packets}}};

// One field of a disk or an interface: its name, or one of its counters.
template <class T>
void read_indexed(T& item, std::string_view key, const StatField& field, const Counters<T>& counters) {
  if (key == "name") {
    if (const auto* text = std::get_if<std::string>(&field.value)) item.name = *text;
    return;
  }
  const auto value = as_unsigned(field);
  for (const auto& [counter, member] : counters) {
    if (value && key == counter) item.*member = *value;
  }
}

StatField field_of(const virTypedParameter& param) {
  StatField out{param.field, uint64_t{0}};
  switch (param.type) {
    case VIR_TYPED_PARAM_INT:
      out.value = static_cast<int64_t>(param.value.i);
      break;
    case VIR_TYPED_PARAM_UINT:
      out.value = static_cast<uint64_t>(param.value.ui);
      break;
    case VIR_TYPED_PARAM_LLONG:
      out.value = static_cast<int64_t>(param.value.l);
      break;
    case VIR_TYPED_PARAM_ULLONG:
      out.value = static_cast<uint64_t>(param.value.ul);
      break;
    case VIR_TYPED_PARAM_DOUBLE:
      out.value = param.value.d;
      break;
    case VIR_TYPED_PARAM_BOOLEAN:
      out.value = static_cast<uint64_t>(param.value.b != 0 ? 1 : 0);
      break;
    case VIR_TYPED_PARAM_STRING:
      out.value = std::string(param.value.s != nullptr ? param.value.s : "");
      break;
    default:
      break;
  }
  return out;
}

}  // namespace

DomainStats domain_stats_of(std::string name, const std::vector<StatField>& fields) {
  DomainStats out;
  out.name = std::move(name);
  std::map<std::size_t, BlockStats> blocks;
  std::map<std::size_t, NetStats> nets;
  for (const auto& field : fields) {
    const std::string_view key = field.field;
    if (key == "state.state") {
      if (const auto value = as_unsigned(field)) out.state = detail::map_state(static_cast<int>(*value));
    } else if (key == "cpu.time") {
      out.cpu_time_ns = as_unsigned(field);
    } else if (key == "vcpu.current") {
      out.vcpus = as_unsigned(field);
    } else if (key == "balloon.current") {
      out.balloon_kib = as_unsigned(field);
    } else if (key == "balloon.maximum") {
      out.balloon_max_kib = as_unsigned(field);
    } else if (key == "balloon.rss") {
      out.rss_kib = as_unsigned(field);
    } else if (const auto block = indexed(key, "block.")) {
      read_indexed(blocks[block->first], block->second, field, kBlockCounters);
    } else if (const auto net = indexed(key, "net.")) {
      read_indexed(nets[net->first], net->second, field, kNetCounters);
    }
  }
  for (auto& [index, block] : blocks) out.blocks.push_back(std::move(block));
  for (auto& [index, net] : nets) out.nets.push_back(std::move(net));
  return out;
}

namespace detail {

Result<std::vector<DomainStats>> LibvirtHypervisor::all_stats() {
  const std::string what = "read every domain's statistics";
  HA_TRY(ConnPtr conn, connection_->get(what));
  // Backing chains left out (no VIR_CONNECT_GET_ALL_DOMAINS_STATS_BACKING): the guest's disks as it
  // sees them. NOWAIT: a domain whose job holds its lock is answered with what needs no monitor
  // call rather than delaying every other domain's figures (libvirt 4.5; QEMU driver).
  constexpr unsigned kGroups = VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_CPU_TOTAL | VIR_DOMAIN_STATS_BALLOON |
                               VIR_DOMAIN_STATS_VCPU | VIR_DOMAIN_STATS_INTERFACE | VIR_DOMAIN_STATS_BLOCK;
  virDomainStatsRecordPtr* records = nullptr;
  int count = virConnectGetAllDomainStats(conn.get(), kGroups, &records, VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT);
  if (count < 0) {
    const LibvirtError error = take_last_error();
    // The test driver refuses NOWAIT (virCheckFlags): asked again without it.
    if (error.code != VIR_ERR_INVALID_ARG) return call_error(conn.get(), error, what);
    count = virConnectGetAllDomainStats(conn.get(), kGroups, &records, 0);
    if (count < 0) return last_call_error(conn.get(), what);
  }
  std::vector<DomainStats> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const virDomainStatsRecordPtr record = records[i];
    std::vector<StatField> fields;
    fields.reserve(static_cast<std::size_t>(record->nparams));
    for (int j = 0; j < record->nparams; ++j) fields.push_back(field_of(record->params[j]));
    const char* name = virDomainGetName(record->dom);
    out.push_back(domain_stats_of(name != nullptr ? name : "", fields));
  }
  virDomainStatsRecordListFree(records);
  return out;
}

}  // namespace detail
}  // namespace hostagent::virt
