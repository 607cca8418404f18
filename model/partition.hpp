// Splits an ordered list of layer costs into S contiguous, non-empty stages that
// minimise the most expensive stage (the pipeline's bottleneck).
#pragma once

#include <string>
#include <vector>

namespace bamboo {

struct stage_range {
  int first = 0; // first layer index
  int last = 0;  // one past the last layer index
  double cost = 0;
  double share = 0; // cost / total cost
  int size() const { return last - first; }
};

// Requires 1 <= stages <= costs.size() and non-negative costs (checked: throws
// std::invalid_argument otherwise, since callers validate first).
std::vector<stage_range> partition(const std::vector<double>& costs, int stages);

// "stage 0: layers [0,2) 31.2% | stage 1: ..." for logs.
std::string describe(const std::vector<stage_range>& parts);

} // namespace bamboo
