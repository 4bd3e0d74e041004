// hostagentctl's tables and field lists.
#include "table.hpp"

#include <algorithm>
#include <cstdio>

#include "hostagent/common/result.hpp"
#include "hostagent/common/text.hpp"

namespace hostagent::ctl {

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::add_row(std::vector<std::string> cells) {
  HA_ASSERT(cells.size() <= headers_.size());
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<std::size_t> widths;
  for (const auto& header : headers_) widths.push_back(header.size());
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      text += cells[i];
      if (i + 1 < cells.size()) text += std::string(widths[i] - cells[i].size() + 2, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
  return out;
}

std::string render_fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::size_t width = 0;
  for (const auto& [name, value] : fields) width = std::max(width, name.size());
  std::string out;
  for (const auto& [name, value] : fields) out += name + ":" + std::string(width - name.size() + 1, ' ') + value + "\n";
  return out;
}

std::string display(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null:
      return "-";
    case boost::json::kind::bool_:
      return value.get_bool() ? "yes" : "no";
    case boost::json::kind::string:
      // What the daemon answers came partly from others (libvirt's names, a guest's console, a
      // peer's text): a cell shows it, never an escape sequence that rewrites the terminal.
      return value.get_string().empty() ? "-" : text::shown(value.get_string());
    case boost::json::kind::int64:
      return std::to_string(value.get_int64());
    case boost::json::kind::uint64:
      return std::to_string(value.get_uint64());
    case boost::json::kind::double_: {
      char text[32];
      std::snprintf(text, sizeof text, "%.2f", value.get_double());
      return text;
    }
    case boost::json::kind::array: {
      std::string joined;
      for (const auto& item : value.get_array()) joined += (joined.empty() ? "" : ", ") + display(item);
      return joined.empty() ? "-" : joined;
    }
    case boost::json::kind::object:
      return "{...}";
  }
  return "-";
}

std::string display(const boost::json::value& object, const char* key) {
  const auto* found = object.is_object() ? object.get_object().if_contains(key) : nullptr;
  return found == nullptr ? "-" : display(*found);
}

std::string terminal_text(std::string_view text) {
  std::string out;
  for (std::size_t start = 0; start <= text.size();) {
    const auto end = std::min(text.find('\n', start), text.size());
    out += text::shown(text.substr(start, end - start));
    if (end == text.size()) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

int print_failure(std::ostream& err, const Error& error) {
  err << "hostagentctl: " << to_string(error.code) << ": " << terminal_text(error.message) << "\n";
  return 1;
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  std::string number = text;
  while (number.back() == '0') number.pop_back();
  if (number.back() == '.') number.pop_back();
  return number + " " + units[unit];
}

}  // namespace hostagent::ctl
