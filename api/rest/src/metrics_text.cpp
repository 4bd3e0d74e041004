// api/rest: the Prometheus text format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats).
#include "metrics_text.hpp"

#include <charconv>
#include <cmath>

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

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
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
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

void MetricsText::family(const std::string& name, const std::string& help, const std::string& type) {
  // HELP text escapes only backslash and newline.
  std::string escaped;
  for (const char c : help) escaped += c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
  text_ += "# HELP " + name + " " + escaped + "\n# TYPE " + name + " " + type + "\n";
}

void MetricsText::sample(const std::string& name, const Labels& labels, double value) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) text_ += ',';
      text_ += labels[i].first + "=\"" + escape_label_value(labels[i].second) + '"';
    }
    text_ += '}';
  }
  text_ += ' ' + format_value(value) + '\n';
}

void MetricsText::histogram(const std::string& name, const Labels& labels, const Histogram& histogram) {
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i < histogram.bounds().size(); ++i) {
    cumulative += histogram.counts()[i];
    Labels with_le = labels;
    with_le.emplace_back("le", format_value(histogram.bounds()[i]));
    sample(name + "_bucket", with_le, static_cast<double>(cumulative));
  }
  Labels with_inf = labels;
  with_inf.emplace_back("le", "+Inf");
  sample(name + "_bucket", with_inf, static_cast<double>(histogram.count()));
  sample(name + "_sum", labels, histogram.sum());
  sample(name + "_count", labels, static_cast<double>(histogram.count()));
}

}  // namespace hostagent::api::detail
