// bench/samples: timings of one arm of a benchmark, in ms, and their nearest-rank quantiles.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace hostagent::bench {

struct Samples {
  std::vector<double> ms;
  double at(double quantile) const {  // nearest rank
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const auto rank = static_cast<std::size_t>(std::ceil(quantile * static_cast<double>(sorted.size())));
    return sorted[std::max<std::size_t>(rank, 1) - 1];
  }
  double median() const { return at(0.5); }
  double p90() const { return at(0.9); }
};

}  // namespace hostagent::bench
