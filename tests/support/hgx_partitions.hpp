// The partitions of an HGX 8-GPU baseboard in Fabric Manager's shared NVSwitch mode, by GPU module
// ID: one of 8, two of 4, four of 2, eight of 1, partition IDs in this order. The fake FM
// (tests/fabric/fake_nvfm.cpp) offers them, and placement's tests build FM's report from them.
// A real FM's table for a board may differ (docs/devices.md); hostagent reads whatever FM reports.
#pragma once

#include <cstdint>
#include <vector>

namespace hostagent::testing {

inline const std::vector<std::vector<uint32_t>>& hgx_8gpu_partitions() {
  static const std::vector<std::vector<uint32_t>> sets = {{1, 2, 3, 4, 5, 6, 7, 8},
                                                          {1, 2, 3, 4},
                                                          {5, 6, 7, 8},
                                                          {1, 2},
                                                          {3, 4},
                                                          {5, 6},
                                                          {7, 8},
                                                          {1},
                                                          {2},
                                                          {3},
                                                          {4},
                                                          {5},
                                                          {6},
                                                          {7},
                                                          {8}};
  return sets;
}

}  // namespace hostagent::testing
