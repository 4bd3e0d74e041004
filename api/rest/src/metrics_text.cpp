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
  // Most values need no escape: appended whole, not a character at a time.
  if (value.find_first_of("\\\"\n") == std::string_view::npos) {
    out += value;
    return;
  }
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
  append_series(name, suffix, labels, le != nullptr);
  if (le == nullptr) {
    text_ += ' ';
  } else {
    append_value(text_, *le);
    text_ += "\"} ";
  }
  append_value(text_, value);
  text_ += '\n';
}

// name+suffix{labels, or name+suffix{labels,le=" when `open_le`, or name+suffix alone: what every
// sample of a series starts with.
void MetricsText::append_series(std::string_view name, std::string_view suffix, const Labels& labels, bool open_le) {
  text_ += name;
  text_ += suffix;
  if (labels.empty() && !open_le) return;
  char separator = '{';
  for (const auto& [label, label_value] : labels) {
    text_ += separator;
    text_ += label;
    text_ += "=\"";
    append_escaped(text_, label_value);
    text_ += '"';
    separator = ',';
  }
  if (open_le) {
    text_ += separator;
    text_ += "le=\"";
  } else {
    text_ += '}';
  }
}

// A histogram's buckets share everything up to le: that prefix is written once and copied per
// bucket (a scrape is mostly buckets: perf under bench_api --profile /v1/metrics).
void MetricsText::histogram(const std::string& name, const Labels& labels, const Histogram& histogram) {
  const std::size_t start = text_.size();
  append_series(name, "_bucket", labels, true);
  const std::string prefix = text_.substr(start);
  text_.resize(start);
  uint64_t cumulative = 0;
  const auto bucket = [&](double le, uint64_t count) {
    text_ += prefix;
    append_value(text_, le);
    text_ += "\"} ";
    append_value(text_, static_cast<double>(count));
    text_ += '\n';
  };
  for (std::size_t i = 0; i < histogram.bounds().size(); ++i) {
    cumulative += histogram.counts()[i];
    bucket(histogram.bounds()[i], cumulative);
  }
  bucket(std::numeric_limits<double>::infinity(), histogram.count());
  write_sample(name, "_sum", labels, nullptr, histogram.sum());
  write_sample(name, "_count", labels, nullptr, static_cast<double>(histogram.count()));
}

}  // namespace hostagent::api::detail
