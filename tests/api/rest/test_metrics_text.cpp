// The Prometheus text writer: HELP/TYPE lines, label escaping, values, cumulative histograms.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "metrics_text.hpp"

namespace hostagent::api::detail {

TEST_CASE("metrics text writes families with HELP and TYPE and escapes label values") {
  MetricsText out;
  out.family("hostagent_vms", "VMs by state.\\ with a backslash", "gauge");
  out.sample("hostagent_vms", {{"state", "shut off"}}, 2);
  out.sample("hostagent_vms", {{"state", "a\"b\\c\nd"}}, 0.5);
  out.sample("hostagent_up", {}, 1);
  CHECK(out.text() ==
        "# HELP hostagent_vms VMs by state.\\\\ with a backslash\n"
        "# TYPE hostagent_vms gauge\n"
        "hostagent_vms{state=\"shut off\"} 2\n"
        "hostagent_vms{state=\"a\\\"b\\\\c\\nd\"} 0.5\n"
        "hostagent_up 1\n");
}

TEST_CASE("metrics text formats special values") {
  CHECK(format_value(0) == "0");
  CHECK(format_value(12345678901.0) == "12345678901");
  CHECK(format_value(0.005) == "0.005");
  CHECK(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_value(std::nan("")) == "NaN");
  CHECK(escape_label_value("plain") == "plain");
}

TEST_CASE("histograms are exposed cumulatively with +Inf, sum and count") {
  Histogram histogram({0.1, 1});
  histogram.observe(0.05);
  histogram.observe(0.5);
  histogram.observe(0.7);
  histogram.observe(30);
  CHECK(histogram.count() == 4);
  MetricsText out;
  out.family("d_seconds", "d", "histogram");
  out.histogram("d_seconds", {{"kind", "create"}}, histogram);
  CHECK(out.text() ==
        "# HELP d_seconds d\n# TYPE d_seconds histogram\n"
        "d_seconds_bucket{kind=\"create\",le=\"0.1\"} 1\n"
        "d_seconds_bucket{kind=\"create\",le=\"1\"} 3\n"
        "d_seconds_bucket{kind=\"create\",le=\"+Inf\"} 4\n"
        "d_seconds_sum{kind=\"create\"} 31.25\n"
        "d_seconds_count{kind=\"create\"} 4\n");
}

}  // namespace hostagent::api::detail
