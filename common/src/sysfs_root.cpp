#include "hostagent/common/sysfs_root.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "hostagent/common/text.hpp"

namespace hostagent {
namespace fs = std::filesystem;

namespace {

Error parse_failure(const fs::path& path, const std::string& text, const char* expected) {
  return Error{ErrorCode::parse_error,
               "parse " + path.string() + ": found " + text::quoted(text) + ", expected " + expected};
}

std::string trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\t')) {
    text.pop_back();
  }
  return text;
}

}  // namespace

Result<SysfsRoot> SysfsRoot::open(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return Error{ErrorCode::not_found, "sysfs root " + root.string() + " is not a directory"};
  }
  return SysfsRoot(root);
}

fs::path SysfsRoot::host_path(const std::string& kernel_path) const {
  // root_ / "/sys" would discard root_; strip the leading slash so the path stays inside the root.
  const auto relative = kernel_path.empty() || kernel_path[0] != '/' ? kernel_path : kernel_path.substr(1);
  return root_ / relative;
}

bool SysfsRoot::exists(const std::string& kernel_path) const {
  std::error_code ec;
  return fs::exists(host_path(kernel_path), ec);
}

Result<std::string> SysfsRoot::read_binary(const std::string& kernel_path) const {
  const auto path = host_path(kernel_path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return errno_error(errno, "read", path.string());
  // An ifstream opens a directory and reads it as empty (read(2) fails with EISDIR, which filebuf
  // takes for the end of the file): a path that names a directory is no attribute.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return errno_error(EISDIR, "read", path.string());
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return errno_error(errno, "read", path.string());
  return out.str();
}

Result<std::string> SysfsRoot::read(const std::string& kernel_path) const {
  HA_TRY(auto text, read_binary(kernel_path));
  return trim(std::move(text));
}

Result<int64_t> SysfsRoot::read_int(const std::string& kernel_path) const {
  HA_TRY(const auto text, read(kernel_path));
  int64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return parse_failure(host_path(kernel_path), text, "a decimal integer");
  }
  return value;
}

Result<uint64_t> SysfsRoot::read_hex(const std::string& kernel_path) const {
  HA_TRY(const auto text, read(kernel_path));
  uint64_t value = 0;
  const bool prefixed = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const auto* begin = text.data() + (prefixed ? 2 : 0);
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value, 16);
  if (!prefixed || ec != std::errc() || ptr != end) {
    return parse_failure(host_path(kernel_path), text, "a hexadecimal number like 0x10de");
  }
  return value;
}

Result<std::optional<int64_t>> SysfsRoot::read_optional_int(const std::string& kernel_path) const {
  if (!exists(kernel_path)) return std::optional<int64_t>{};
  HA_TRY(const auto value, read_int(kernel_path));
  return std::optional<int64_t>{value};
}

Result<std::optional<std::string>> SysfsRoot::read_link_name(const std::string& kernel_path) const {
  const auto path = host_path(kernel_path);
  std::error_code ec;
  if (!fs::is_symlink(path, ec)) {
    if (fs::exists(path, ec)) {
      return Error{ErrorCode::parse_error, "parse " + path.string() + ": expected a symlink"};
    }
    return std::optional<std::string>{};
  }
  const auto target = fs::read_symlink(path, ec);
  if (ec) return errno_error(ec.value(), "readlink", path.string());
  return std::optional<std::string>{target.filename().string()};
}

Result<std::optional<int>> SysfsRoot::read_link_number(const std::string& kernel_path) const {
  HA_TRY(const auto name, read_link_name(kernel_path));
  if (!name) return std::optional<int>{};
  int value = -1;
  const auto* end = name->data() + name->size();
  const auto [ptr, ec] = std::from_chars(name->data(), end, value);
  if (name->empty() || ec != std::errc() || ptr != end || value < 0) {
    return parse_failure(host_path(kernel_path), *name, "a link to a numbered entry");
  }
  return std::optional<int>{value};
}

Result<std::vector<std::string>> SysfsRoot::list(const std::string& kernel_path, bool missing_ok) const {
  const auto path = host_path(kernel_path);
  std::error_code ec;
  std::vector<std::string> names;
  fs::directory_iterator it(path, ec);
  if (ec) {
    if (missing_ok && (ec == std::errc::no_such_file_or_directory)) return names;
    return errno_error(ec.value(), "list", path.string());
  }
  for (const auto& entry : it) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

CpuListRead read_cpu_list(const std::string& text) {
  constexpr int kMaxCpuId = 65536;
  // Ranges first, expanded once merged: "0-65535" repeated through a 4 KiB file would otherwise be
  // 20 million ids pushed and sorted (found by fuzz_config), where the answer has 65,536 at most.
  std::vector<std::pair<int, int>> spans;
  std::stringstream ranges(text);
  std::string range;
  while (std::getline(ranges, range, ',')) {
    if (range.empty()) continue;
    int first = 0;
    int last = 0;
    const auto dash = range.find('-');
    const auto* end = range.data() + range.size();
    const auto* split = dash == std::string::npos ? end : range.data() + dash;
    const auto r1 = std::from_chars(range.data(), split, first);
    if (r1.ec != std::errc() || r1.ptr != split) return CpuListRead{std::nullopt, "bad range " + text::quoted(range)};
    last = first;
    if (dash != std::string::npos) {
      const auto r2 = std::from_chars(split + 1, end, last);
      if (r2.ec != std::errc() || r2.ptr != end || last < first) {
        return CpuListRead{std::nullopt, "bad range " + text::quoted(range)};
      }
    }
    // The kernel's NR_CPUS tops out at 8192; anything far beyond is garbage, not a host.
    if (last >= kMaxCpuId) {
      return CpuListRead{std::nullopt, "CPU " + std::to_string(last) + " is beyond any host (at most " +
                                           std::to_string(kMaxCpuId - 1) + ")"};
    }
    spans.emplace_back(first, last);
  }
  std::sort(spans.begin(), spans.end());
  std::vector<int> ids;
  int next = 0;  // the lowest id not yet taken; every id is >= 0
  for (const auto& [first, last] : spans) {
    for (int id = std::max(first, next); id <= last; ++id) ids.push_back(id);
    next = std::max(next, last + 1);
  }
  return CpuListRead{std::move(ids), ""};
}

Result<std::vector<int>> parse_cpu_list(const std::string& text) {
  auto read = read_cpu_list(text);
  if (read.cpus) return *std::move(read.cpus);
  return Error{ErrorCode::parse_error, "cpu list " + text::quoted(text) + ": " + read.why};
}

std::string format_cpu_list(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace hostagent
