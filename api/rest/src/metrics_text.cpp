// api/rest: the Prometheus text format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats).
#include "metrics_text.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>

namespace hostagent::api::detail {

void Histogram::observe(double value) {
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  }
  ++count_;
  sum_ += value;
}

// Appends rather than returns: a scrape writes thousands of label values and numbers, and a
// temporary string for each was most of what the counted families cost (perf under bench_api).
namespace {

void append_escaped(std::string& out, std::string_view value) {
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_value(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    out.append(buffer, result.ptr);
  }
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  append_escaped(out, value);
  return out;
}

std::string format_value(double value) {
  std::string out;
  append_value(out, value);
  return out;
}

void MetricsText::family(const std::string& name, const std::string& help, const std::string& type) {
  // HELP text escapes only backslash and newline.
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  for (const char c : help) {
    if (c == '\\') {
      text_ += "\\\\";
    } else if (c == '\n') {
      text_ += "\\n";
    } else {
      text_ += c;
    }
  }
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void MetricsText::sample(const std::string& name, const Labels& labels, double value) {
  write_sample(name, "", labels, nullptr, value);
}

// name+suffix{labels[,le="LE"]} value: `le` null for none.
void MetricsText::write_sample(std::string_view name, std::string_view suffix, const Labels& labels, const double* le,
                               double value) {
  text_ += name;
  text_ += suffix;
  if (!labels.empty() || le != nullptr) {
    char separator = '{';
    for (const auto& [label, label_value] : labels) {
      text_ += separator;
      text_ += label;
      text_ += "=\"";
      append_escaped(text_, label_value);
      text_ += '"';
      separator = ',';
    }
    if (le != nullptr) {
      text_ += separator;
      text_ += "le=\"";
      append_value(text_, *le);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
  append_value(text_, value);
  text_ += '\n';
}

void MetricsText::histogram(const std::string& name, const Labels& labels, const Histogram& histogram) {
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i < histogram.bounds().size(); ++i) {
    cumulative += histogram.counts()[i];
    write_sample(name, "_bucket", labels, &histogram.bounds()[i], static_cast<double>(cumulative));
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  write_sample(name, "_bucket", labels, &kInf, static_cast<double>(histogram.count()));
  write_sample(name, "_sum", labels, nullptr, histogram.sum());
  write_sample(name, "_count", labels, nullptr, static_cast<double>(histogram.count()));
}

}  // namespace hostagent::api::detail
