// api/rest, private: a small writer of the Prometheus text exposition format 0.0.4 and the
// histograms it exposes. Every family gets its HELP and TYPE lines once, before its samples, and
// label values are escaped as the format says (backslash, double quote, newline).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hostagent::api::detail {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Fixed buckets, cumulative at exposition.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }  // per bucket, not cumulative
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

class MetricsText {
 public:
  // Starts a family: `type` is counter, gauge or histogram.
  void family(const std::string& name, const std::string& help, const std::string& type);
  void sample(const std::string& name, const Labels& labels, double value);
  // name_bucket{...,le=...} (cumulative, +Inf last), name_sum, name_count.
  void histogram(const std::string& name, const Labels& labels, const Histogram& histogram);
  // Families another MetricsText wrote (whole: their HELP, TYPE and samples), kept to be reused.
  void append(const std::string& rendered) { text_ += rendered; }
  const std::string& text() const { return text_; }
  // The text, moved out: what a finished scrape answers with, without a copy of it.
  std::string take() && { return std::move(text_); }
  // Room for `bytes` (what the last scrape took), so a scrape does not grow its text step by step.
  void reserve(std::size_t bytes) { text_.reserve(bytes); }

 private:
  void write_sample(std::string_view name, std::string_view suffix, const Labels& labels, const double* le,
                    double value);
  void append_series(std::string_view name, std::string_view suffix, const Labels& labels, bool open_le);

  std::string text_;
};

// A label value escaped for the format: \ -> \\, " -> \", newline -> \n.
std::string escape_label_value(const std::string& value);
// A sample value: integers exactly, others shortest round-trip; +Inf, -Inf, NaN.
std::string format_value(double value);

}  // namespace hostagent::api::detail
